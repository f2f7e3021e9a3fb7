"""What a refit leaves out, and the anomalous-voter flags: duplicate prompts count once, identity votes
are counted on the snapshot, planted voters in the database are flagged (honest ones rarely), and a
confirmed voter's votes leave the next snapshot, which keeps the fit from before beside it."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.db import transaction

from arena import tasks
from arena.models import RatingSnapshot, Vote, VoterFlag
from arena.play.base import ArenaError
from arena.ratings.refit import snapshots_refit
from arena.votes import voters
from tests.arena.vote_data import T0, votes_create, votes_from_rows
from workers.queues import DEFAULT

pytestmark = pytest.mark.django_db

ROUNDS = 20
THETA = {"m0": -1.5, "m1": -0.8, "m2": -0.2, "m3": 0.3, "m4": 0.9, "m5": 1.5}
NAMES = list(THETA)


def overall() -> RatingSnapshot:
    return RatingSnapshot.objects.filter(method="bt", category="overall").order_by("-created_at", "-id").first()


def test_repeated_prompts_count_once_and_identity_votes_are_counted_on_the_snapshot():
    votes = votes_create({"a": 0.5, "b": 0.0, "c": -0.5}, 1030, seed=1)
    for k, vote in enumerate(votes):
        vote.prompt_hash = "spam" if k >= 1010 else f"p{k}"
    Vote.objects.bulk_update(votes, ["prompt_hash"])
    votes_create({"a": 0.5, "b": 0.0}, 4, counted=False, start=T0 + timedelta(days=1))  # identity_revealed
    snapshots_refit(rounds=ROUNDS)
    snap = overall()
    integrity = snap.settings["integrity"]
    assert integrity["duplicate_prompts_dropped"] == 19 and integrity["duplicate_prompts"] == 1
    assert integrity["duplicate_threshold"] == 1.0 and integrity["identity_revealed"] == 4
    assert snap.vote_count == 1030 - 19
    assert any("19 repeats of 1 prompt sent" in note and "4 votes on answers that named a model" in note
               for note in snap.extra["notes"])  # fmt: skip
    assert all(s.settings["integrity"] == integrity for s in RatingSnapshot.objects.all())


def planted_votes(seed: int = 0):
    """40 honest voters (25 votes each, from THETA), 3 coin-flipping clickers sharing one IP (60 votes
    each) and 2 voters who vote only in m1's battles and always for it (25 votes each)."""
    rng = np.random.default_rng(seed)
    rows = []

    def pair():
        a, b = rng.choice(len(NAMES), size=2, replace=False)
        return NAMES[a], NAMES[b]

    for voter in range(40):
        for _ in range(25):
            a, b = pair()
            p = 1 / (1 + np.exp(-(THETA[a] - THETA[b])))
            winner = "tie" if rng.random() < 0.1 else ("model_a" if rng.random() < p else "model_b")
            rows.append((a, b, winner, f"honest-{voter}", f"ip-honest-{voter}"))
    for voter in range(3):
        for _ in range(60):
            a, b = pair()
            rows.append((a, b, "model_a" if rng.random() < 0.5 else "model_b", f"clicker-{voter}", "ip-clickers"))
    for voter in range(2):
        for _ in range(25):
            other = NAMES[[0, 2, 3, 4, 5][rng.integers(0, 5)]]
            left = rng.random() < 0.5
            rows.append(("m1", other, "model_a", f"fan-{voter}", f"ip-fan-{voter}") if left
                        else (other, "m1", "model_b", f"fan-{voter}", f"ip-fan-{voter}"))  # fmt: skip
    order = rng.permutation(len(rows))
    return votes_from_rows([rows[k] for k in order])


def test_planted_voters_are_flagged_confirmed_and_left_out_with_the_fit_before_beside_it(
    django_capture_on_commit_callbacks,
):
    planted_votes()
    snapshots_refit(rounds=ROUNDS)
    summary = voters.voters_flag(alpha=0.01, min_votes=20)
    assert summary["tested"] == {"session": 45, "ip": 43}
    sessions = set(VoterFlag.objects.filter(kind="session").values_list("voter_hash", flat=True))
    assert {f"clicker-{k}" for k in range(3)} | {"fan-0", "fan-1"} <= sessions
    assert len({s for s in sessions if s.startswith("honest")}) <= 2  # at most 5% of 40
    assert "ip-clickers" in set(VoterFlag.objects.filter(kind="ip").values_list("voter_hash", flat=True))
    fan = VoterFlag.objects.get(kind="session", voter_hash="fan-0")
    assert fan.status == "pending" and fan.statistics["favoured"] == "m1" and fan.p_value < 0.01
    again = voters.voters_flag(alpha=0.01, min_votes=20)  # idempotent: nobody is flagged twice
    assert again["created"] == 0

    before = overall()
    with django_capture_on_commit_callbacks(execute=False), transaction.atomic():
        flag, excluded = voters.voter_flag_decide(fan.pk, confirm=True)
    assert flag.status == "confirmed" and flag.decided_at is not None and excluded == 25
    assert not Vote.objects.filter(session_hash="fan-0", counted=True).exists()
    assert set(Vote.objects.filter(session_hash="fan-0").values_list("excluded_reason", flat=True)) == {
        "voter_flagged"
    }
    with transaction.atomic(), pytest.raises(ArenaError, match="already decided"):
        voters.voter_flag_decide(fan.pk, confirm=False)
    other = VoterFlag.objects.get(kind="session", voter_hash="clicker-0")
    with transaction.atomic():
        voters.voter_flag_decide(other.pk, confirm=False)
    assert Vote.objects.filter(session_hash="clicker-0", counted=True).count() == 60  # dismissed: nothing moves

    snapshots_refit(rounds=ROUNDS)
    after = overall()
    assert after.vote_count == before.vote_count - 25
    assert after.settings["integrity"]["voter_flagged"] == 25
    assert after.settings["integrity"]["voters_confirmed"] == 1
    shown = after.extra["before_voter_exclusion"]
    assert shown["vote_count"] == before.vote_count
    rating_before = {r["model"]: r["rating"] for r in shown["rows"]}
    rating_after = {r["model"]: r["rating"] for r in after.rows}
    assert rating_before == pytest.approx({r["model"]: r["rating"] for r in before.rows}, abs=1e-4)
    assert rating_after["m1"] < rating_before["m1"]  # the fan's votes had lifted m1


def test_votes_a_confirmed_voter_casts_later_are_set_aside_by_the_next_run():
    votes_from_rows([("m0", "m1", "model_a", "late", "ip-late")] * 3)
    flag = VoterFlag.objects.create(kind="session", voter_hash="late", votes=20, p_value=1e-6, status="confirmed")
    assert voters.voters_flag()["reapplied"] == 3
    assert not Vote.objects.filter(session_hash="late", counted=True).exists()
    assert flag.status == "confirmed"


def test_identity_decisions_restore_or_confirm_once():
    votes = votes_create({"a": 0.5, "b": 0.0}, 2, counted=False)
    with transaction.atomic():
        restored = voters.vote_identity_decide(votes[0].pk, restore=True)
        kept_out = voters.vote_identity_decide(votes[1].pk, restore=False)
    assert (restored.counted, restored.excluded_reason) == (True, "")
    assert (kept_out.counted, kept_out.excluded_reason) == (False, "identity_confirmed")
    for vote in votes:
        with transaction.atomic(), pytest.raises(ArenaError, match="not waiting"):
            voters.vote_identity_decide(vote.pk, restore=True)
    with transaction.atomic(), pytest.raises(ArenaError, match="No such vote"):
        voters.vote_identity_decide(10**9, restore=True)


def test_the_flag_task_runs_on_the_beat_schedule(settings):
    assert settings.CELERY_BEAT_SCHEDULE["voters-flag"]["task"] == "arena.tasks.voters_flag"
    assert tasks.voters_flag.declared_queue == DEFAULT
    assert tasks.voters_flag() == {"tested": {}, "flagged": {}, "created": 0, "reapplied": 0, "note": "no fit yet"}
    planted_votes(seed=1)
    snapshots_refit(rounds=ROUNDS)
    summary = tasks.voters_flag()
    assert summary["tested"]["session"] == 45 and summary["created"] >= 5


def test_a_new_identity_vote_alone_updates_the_counts_on_the_next_refit():
    votes_create({"a": 0.5, "b": 0.0}, 40, seed=5)
    snapshots_refit(rounds=ROUNDS)
    assert snapshots_refit(rounds=ROUNDS)["skipped"] is True
    votes_create({"a": 0.5, "b": 0.0}, 1, counted=False, start=T0 + timedelta(days=2))
    assert snapshots_refit(rounds=ROUNDS)["skipped"] is False
    assert overall().settings["integrity"]["identity_revealed"] == 1
