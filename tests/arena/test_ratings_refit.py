"""Rating snapshots from counted votes: methods, categories, fallbacks, one transaction, the task."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.core.cache import cache

from arena.models import RatingSnapshot, Vote
from arena.ratings import selectors as rating_selectors
from arena.ratings.fits import FALLBACK_PRIOR, style_rounds
from arena.ratings.live import LONG_PROMPT_TOKENS
from arena.ratings.refit import snapshots_compute, snapshots_refit
from arena.votes import selectors
from evalcore.ratings import aggregate, battles_from_arrays, bootstrap_bradley_terry
from evalcore.ratings.provisional import mark_provisional
from tests.arena.vote_data import T0, votes_create
from tests.conftest import celery_eager_tasks

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 1.0, "beta": 0.0, "gamma": -1.0}
ROUNDS = 40


def latest(method, category="overall"):
    snap = rating_selectors.snapshot_latest(method, category)
    assert snap is not None, f"no {method} snapshot for {category}"
    return snap


def test_refit_writes_bt_elo_and_style_with_intervals():
    votes_create(STRENGTHS, 600, seed=1)
    summary = snapshots_refit(rounds=ROUNDS, seed=3)
    assert summary["skipped"] is False and summary["votes"] == 600
    for method in ("bt", "elo", "style"):
        snap = latest(method)
        assert snap.vote_count == 600
        assert snap.first_vote_at < snap.last_vote_at
        assert [r["model"] for r in snap.rows] == ["alpha", "beta", "gamma"], method
        for row in snap.rows:
            assert row["ci_low"] <= row["rating"] <= row["ci_high"]
            assert row["battles"] > 300
            assert set(row) >= {
                "model",
                "rating",
                "ci_low",
                "ci_high",
                "rank",
                "rank_ub",
                "battles",
                "tied_with",
            }
        extra = snap.extra
        assert extra["models"] == ["alpha", "beta", "gamma"]
        assert np.asarray(extra["predicted"]).shape == (3, 3)
        assert extra["win_rate"][0][0] is None  # the diagonal has no games
        assert extra["battles"][0][1] == extra["battles"][1][0] > 0
        assert snap.settings["seed"] == 3 and snap.settings["rounds"] == ROUNDS
    bt = latest("bt")
    assert bt.settings["interval"] == "bootstrap" and bt.settings["bootstrap_rounds"] == ROUNDS
    assert [r["rank_ub"] for r in bt.rows] == [1, 2, 3]  # a logit apart: clearly separated
    assert "rank_ci" in bt.rows[0]
    assert latest("elo").settings["interval"] == "permutation"
    coefficients = {c["coefficient"] for c in latest("style").extra["coefficients"]}
    assert coefficients == {"tokens", "headers", "list_items", "bold"}


def test_bt_snapshot_equals_evalcore_on_the_same_votes():
    votes = votes_create(STRENGTHS, 300, seed=2)
    snapshots_refit(rounds=ROUNDS, seed=5)
    battles = battles_from_arrays(
        [v.model_a.name for v in votes], [v.model_b.name for v in votes], [v.winner for v in votes]
    )
    counts = aggregate(battles)
    expected = bootstrap_bradley_terry(counts, rounds=ROUNDS, rng=np.random.default_rng(5))
    # ~200 votes each: provisional under the default threshold of 300, with the same widening.
    expected = mark_provisional(expected, counts, min_battles=300)
    rows = {r["model"]: r for r in latest("bt").rows}
    for want in expected.to_rows():
        got = rows[want["model"]]
        for key in ("rating", "ci_low", "ci_high"):
            assert got[key] == pytest.approx(want[key], abs=1e-9)
        assert got["rank_ub"] == want["rank_ub"] and got["provisional"] is want["provisional"] is True


def test_close_models_are_marked_statistically_tied():
    votes_create({"one": 0.0, "two": 0.02, "far": -3.0}, 200, seed=4)
    snapshots_refit(rounds=ROUNDS)
    rows = {r["model"]: r for r in latest("bt").rows}
    assert "one" in rows["two"]["tied_with"] and "two" in rows["one"]["tied_with"]
    assert rows["far"]["tied_with"] == []
    assert latest("bt").rows[1]["tied_with_above"] is True


def test_categories_language_multi_turn_and_long_prompts():
    votes_create(
        STRENGTHS, 300, seed=5, language=["en", "en", "de"], turn_count=[1, 1, 1, 3],
        prompt_tokens=[20, LONG_PROMPT_TOKENS + 10],
    )  # fmt: skip
    votes_create(STRENGTHS, 5, seed=6, language="fr", start=selectors_later())
    snapshots_refit(rounds=ROUNDS, min_category_votes=60)
    categories = rating_selectors.snapshot_categories()
    assert categories[0] == "overall"
    assert set(categories) == {"overall", "language:en", "language:de", "multi_turn", "long_prompt", "no_ties"}
    assert latest("bt", "language:en").vote_count == 200
    assert latest("bt", "language:de").vote_count == 100
    assert latest("style", "multi_turn").vote_count == 75
    long_prompt = latest("elo", "long_prompt")
    assert long_prompt.vote_count == 150 and long_prompt.settings["long_prompt_tokens"] == LONG_PROMPT_TOKENS
    assert latest("bt", "overall").vote_count == 305
    assert RatingSnapshot.objects.count() == 6 * 3


def selectors_later():
    from tests.arena.vote_data import T0

    return T0.replace(year=2027)


def test_too_few_votes_give_empty_snapshots_with_a_note():
    votes_create(STRENGTHS, 4, seed=7)
    snapshots_refit(rounds=ROUNDS, min_votes=10)
    snap = latest("bt")
    assert snap.rows == [] and snap.vote_count == 4
    assert "too few votes" in snap.extra["notes"][0]
    assert latest("bt", "multi_turn").vote_count == 0


def test_no_votes_at_all_still_writes_an_empty_overall():
    snapshots_refit(rounds=ROUNDS)
    snap = latest("bt")
    assert snap.rows == [] and snap.vote_count == 0 and snap.first_vote_at is None


def test_uncounted_votes_are_left_out():
    votes_create(STRENGTHS, 100, seed=8)
    votes_create(STRENGTHS, 50, seed=9, counted=False, start=selectors_later())
    snapshots_refit(rounds=ROUNDS)
    assert latest("bt").vote_count == 100


def test_a_model_that_won_every_game_gets_the_prior_and_a_note():
    pairs = [("champ", "b"), ("champ", "c"), ("b", "c"), ("c", "b")]
    votes = votes_create({"champ": 0.0, "b": 0.0, "c": 0.0}, 80, seed=10, pairs=pairs, tie_rate=0)
    for vote in votes:  # champ wins every game it plays
        if "champ" in (vote.model_a.name, vote.model_b.name):
            vote.winner = "model_a" if vote.model_a.name == "champ" else "model_b"
    Vote.objects.bulk_update(votes, ["winner"])
    snapshots_refit(rounds=ROUNDS)
    for method in ("bt", "style"):
        snap = latest(method)
        assert snap.settings["prior"] == FALLBACK_PRIOR, method
        assert any("prior" in note and "never lost" in note for note in snap.extra["notes"]), snap.extra[
            "notes"
        ]
        assert snap.rows[0]["model"] == "champ"
        assert all(np.isfinite(r["rating"]) for r in snap.rows)


def test_a_disconnected_graph_gets_the_prior_and_a_note():
    votes_create(
        {"a1": 0.0, "a2": 0.5, "b1": 0.0, "b2": 0.5}, 120, seed=11, pairs=[("a1", "a2"), ("b1", "b2")]
    )
    snapshots_refit(rounds=ROUNDS)
    notes = latest("bt").extra["notes"]
    assert any("not connected" in n and "prior" in n for n in notes), notes


def test_style_control_discounts_a_verbose_model():
    votes_create({"plain": 0.0, "wordy": 0.0, "third": 0.0}, 900, seed=12, verbose={"wordy": 1.0})
    snapshots_refit(rounds=ROUNDS)
    bt = {r["model"]: r["rating"] for r in latest("bt").rows}
    style = latest("style")
    controlled = {r["model"]: r["rating"] for r in style.rows}
    assert bt["wordy"] > bt["plain"] + 50  # voters rewarded length
    assert controlled["wordy"] < bt["wordy"] - 30
    tokens = next(c for c in style.extra["coefficients"] if c["coefficient"] == "tokens")
    assert tokens["ci_low"] > 0


def test_refit_is_skipped_when_no_vote_changed_and_forced_on_request():
    votes_create(STRENGTHS, 50, seed=13)
    assert snapshots_refit(rounds=ROUNDS)["skipped"] is False
    before = RatingSnapshot.objects.count()
    assert snapshots_refit(rounds=ROUNDS)["skipped"] is True
    assert RatingSnapshot.objects.count() == before
    assert snapshots_refit(rounds=ROUNDS, force=True)["skipped"] is False
    assert RatingSnapshot.objects.count() == 2 * before
    Vote.objects.filter(pk=Vote.objects.first().pk).update(counted=False)
    assert snapshots_refit(rounds=ROUNDS)["votes"] == 49


def test_style_bootstrap_rounds_stay_within_the_budget():
    assert style_rounds(1000, 1000, 2_000_000) == 1000
    assert style_rounds(10_000, 1000, 2_000_000) == 200
    assert style_rounds(100_000, 1000, 2_000_000) == 0  # fewer than 100 rounds would fit: sandwich
    votes_create(STRENGTHS, 200, seed=16)
    snapshots_refit(rounds=ROUNDS, style_budget=200 * ROUNDS - 1)
    style = latest("style")
    assert style.settings["interval"] == "sandwich" and style.settings["bootstrap_rounds"] == 0
    assert any("sandwich" in note for note in style.extra["notes"])
    assert all(r["ci_low"] < r["rating"] < r["ci_high"] for r in style.rows)
    assert latest("bt").settings["bootstrap_rounds"] == ROUNDS  # BT is not capped


def test_bad_rounds_are_refused():
    with pytest.raises(ValueError, match="rounds"):
        snapshots_refit(rounds=0)


@pytest.fixture
def eager_celery(settings):
    settings.ARENA_REFIT_ROUNDS = ROUNDS
    # A cache of this test's own: the debounce and lock keys must not meet a dev worker's.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with celery_eager_tasks() as app:
        cache.delete("arena:ratings_refit:pending")
        yield app
    cache.delete("arena:ratings_refit:pending")


def test_task_refits_and_the_scheduler_keeps_one_waiting(eager_celery):
    from arena.play.dispatch import REFIT_PENDING_KEY, ratings_refit_schedule
    from arena.tasks import ratings_refit

    votes_create(STRENGTHS, 60, seed=14)
    assert ratings_refit.name == "arena.tasks.ratings_refit"
    assert ratings_refit_schedule() is True  # runs at once in eager mode
    assert latest("bt").vote_count == 60
    assert latest("bt").settings["rounds"] == ROUNDS
    assert cache.get(REFIT_PENDING_KEY) is None  # the refit cleared its key when it started
    # A refit waiting in a busy queue holds the key however long it waits: later votes queue nothing.
    cache.add(REFIT_PENDING_KEY, "waiting", timeout=600)
    votes_create(STRENGTHS, 10, seed=15, start=selectors_later())
    for _ in range(5):
        assert ratings_refit_schedule() is False
    assert latest("bt").vote_count == 60
    # The waiting refit starts: its first act is to clear the key, so the votes are all in it.
    ratings_refit.delay(False, "waiting").get()
    assert latest("bt").vote_count == 70 and cache.get(REFIT_PENDING_KEY) is None
    votes_create(STRENGTHS, 5, seed=16, start=selectors_later())
    assert ratings_refit_schedule() is True  # a vote after that start asks for the next refit
    assert latest("bt").vote_count == 75


def test_a_waiting_refit_that_meets_a_running_one_is_followed_up(eager_celery):
    """The requested refit finds another running: it marks its key orphaned and sends nothing; the
    running refit, when it ends, sends one follow-up for it (no vote waits for the beat). A beat refit
    that steps aside leaves a waiting request alone."""
    from arena.play.dispatch import REFIT_PENDING_KEY
    from arena.tasks import REFIT_ORPHANED, REFIT_RUNNING_KEY, ratings_refit, refit_orphan_followup

    votes_create(STRENGTHS, 30, seed=18)
    cache.add(REFIT_RUNNING_KEY, 1, timeout=60)
    cache.add(REFIT_PENDING_KEY, "mine", timeout=600)
    try:
        assert ratings_refit.delay(False, None).get() == {"skipped": "another refit is running"}  # beat's
        assert cache.get(REFIT_PENDING_KEY) == "mine"
        assert ratings_refit.delay(False, "mine").get() == {"skipped": "another refit is running"}
        assert cache.get(REFIT_PENDING_KEY) == REFIT_ORPHANED
        assert not RatingSnapshot.objects.exists()
    finally:
        cache.delete(REFIT_RUNNING_KEY)
    assert refit_orphan_followup() is True  # what the running refit does as it ends (eager: runs now)
    assert latest("bt").vote_count == 30 and cache.get(REFIT_PENDING_KEY) is None
    assert refit_orphan_followup() is False  # nothing orphaned: nothing sent


def test_a_refit_steps_aside_while_another_runs(eager_celery):
    from arena.tasks import REFIT_RUNNING_KEY, ratings_refit

    votes_create(STRENGTHS, 30, seed=17)
    cache.add(REFIT_RUNNING_KEY, 1, timeout=60)
    try:
        assert ratings_refit.delay().get() == {"skipped": "another refit is running"}
        assert not RatingSnapshot.objects.exists()
    finally:
        cache.delete(REFIT_RUNNING_KEY)
    assert ratings_refit.delay(force=True).get()["written"] == 12  # 4 categories (no_ties too) x 3 methods
    assert cache.get(REFIT_RUNNING_KEY) is None  # released after the refit


def test_scheduling_never_fails_a_committed_vote(settings):
    from arena.play.dispatch import ratings_refit_schedule

    # A cache that cannot be reached (nothing listens on port 1): scheduling gives up quietly.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    assert ratings_refit_schedule() is False


def _elo_rows_replayed_in_full() -> dict[str, list[dict]]:
    """Every category's Elo rows from a replay of all counted votes (no stored state)."""
    params = latest("elo").settings["refit"]
    _, drafts, _ = snapshots_compute(params)
    return {d.category: d.rows for d in drafts if d.method == "elo"}


def test_elo_continues_the_last_refit_and_equals_the_full_replay():
    """Above the permutation study's limit a refit continues the last refit's Elo replay when the votes
    begin with the same votes in the same order: the same numbers, only the new votes replayed; a change
    among the earlier votes (one set aside) replays everything."""
    votes_create(STRENGTHS, 300, seed=21, language=["en", "de"])
    snapshots_refit(rounds=ROUNDS, elo_orders=0, min_category_votes=20)
    first = latest("elo")
    assert first.settings["resumed_after"] == 0 and first.extra["elo_state"]["votes"] == 300
    votes_create(STRENGTHS, 120, seed=22, language=["en", "de"], start=T0 + timedelta(hours=1))
    snapshots_refit(rounds=ROUNDS, elo_orders=0, min_category_votes=20)
    for category in ("overall", "language:en", "language:de"):
        elo = latest("elo", category)
        assert 0 < elo.settings["resumed_after"] < elo.vote_count, category
    assert latest("elo").settings["resumed_after"] == 300 and latest("elo").vote_count == 420
    full = _elo_rows_replayed_in_full()
    for category, rows in full.items():
        assert latest("elo", category).rows == rows, category  # equal, not close
    Vote.objects.filter(pk=Vote.objects.order_by("created_at", "id")[5].pk).update(counted=False)
    snapshots_refit(rounds=ROUNDS, elo_orders=0, min_category_votes=20)
    assert latest("elo").settings["resumed_after"] == 0 and latest("elo").vote_count == 419
    assert latest("elo").rows == _elo_rows_replayed_in_full()["overall"]


def test_style_fit_starts_from_the_last_refit_and_reaches_the_same_ratings():
    """A refit's style fits start Newton from the last refit's style snapshot of their category: the
    same ratings as a fit from plain BT (within its tolerance), and the snapshot says where it started."""
    votes_create(STRENGTHS, 300, seed=24, language=["en", "de"], verbose={"alpha": 0.3})
    snapshots_refit(rounds=ROUNDS, elo_orders=0, min_category_votes=20)
    assert latest("style").settings["newton_start"] == "plain BT"
    votes_create(STRENGTHS, 100, seed=25, language=["en", "de"], start=T0 + timedelta(hours=1))
    snapshots_refit(rounds=ROUNDS, elo_orders=0, min_category_votes=20)
    params = latest("style").settings["refit"]
    _, drafts, _ = snapshots_compute(params)  # as ratings_verify does: no start from stored snapshots
    fitted = [d for d in drafts if d.method == "style" and d.rows]
    assert {d.category for d in fitted} >= {"overall", "language:en", "language:de"}
    for draft in fitted:
        stored = latest("style", draft.category)
        assert stored.settings["newton_start"] == "last refit" and draft.settings["newton_start"] == "plain BT"
        for kept, fresh in zip(stored.rows, draft.rows):
            assert kept["model"] == fresh["model"]
            assert kept["rating"] == pytest.approx(fresh["rating"], abs=1e-4), draft.category


def test_a_broken_elo_state_is_replayed_in_full():
    votes_create(STRENGTHS, 200, seed=23)
    snapshots_refit(rounds=ROUNDS, elo_orders=0)
    good = latest("elo")
    for broken in ({"votes": "x"}, {"ratings": {"alpha": "nan?"}}, {"digest": "0" * 64}, {"version": 0},
                   {"votes": 10_000}, {"ratings": None}, {"k": 32.0}):  # fmt: skip
        RatingSnapshot.objects.filter(pk=good.pk).update(
            extra={**good.extra, "elo_state": {**good.extra["elo_state"], **broken}}
        )
        snapshots_refit(rounds=ROUNDS, elo_orders=0, force=True)
        again = latest("elo")
        assert again.settings["resumed_after"] == 0, broken
        assert again.rows == good.rows
        RatingSnapshot.objects.filter(pk=again.pk).delete()
    RatingSnapshot.objects.filter(pk=good.pk).update(extra=good.extra)  # the state as the refit stored it
    snapshots_refit(rounds=ROUNDS, elo_orders=0, force=True)
    assert latest("elo").settings["resumed_after"] == 200 and latest("elo").rows == good.rows


def test_battles_of_every_vote_are_read_only_views_and_a_subset_renumbers_its_models():
    from arena.ratings.draft import category_battles

    votes_create({**STRENGTHS, "delta": 0.5}, 200, seed=41)
    columns = selectors.votes_counted_columns()
    whole = category_battles(columns, np.ones(len(columns), dtype=bool))
    assert whole.models == columns.names
    for name in ("model_a", "model_b", "outcome", "tstamp", "style_a", "style_b"):
        assert not getattr(whole, name).flags.writeable, name
    np.testing.assert_array_equal(whole.style_a, columns.style_a)
    np.testing.assert_array_equal(whole.model_a, columns.a)
    # Without the votes of "delta": the other three, numbered 0-2 in name order, the same battles.
    delta = columns.names.index("delta")
    keep = (columns.a != delta) & (columns.b != delta)
    part = category_battles(columns, keep)
    assert part.models == ("alpha", "beta", "gamma")
    names = np.asarray(part.models)
    np.testing.assert_array_equal(names[part.model_a], np.asarray(columns.names)[columns.a[keep]])
    np.testing.assert_array_equal(names[part.model_b], np.asarray(columns.names)[columns.b[keep]])
    np.testing.assert_array_equal(part.style_b, columns.style_b[keep])
    assert part.style_b.flags.writeable  # a copy of its own
