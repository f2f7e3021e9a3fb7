"""Prompt categories on the site, with the real SmolLM2 as the tagger (it tags poorly; what is tested is
the pipeline): every vote's first prompt tagged in batches and recorded with the tagger and protocol
version, a re-run answered from the stored tags (no model call), failures kept and retried, a refit per
tagged category (Bradley-Terry equal to evalcore's on the tagged votes, style control, too few votes: no
category), the board's selector with vote counts, and staff checks of published prompts with the
agreement figure and its mid-p interval."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

from arena.categories.selectors import category_agreement, tag_masks, tags_sample
from arena.categories.services import categorizations_retry, tag_review_record, votes_categorize
from arena.models import PromptTag, RatingSnapshot, TagReview, Turn, Vote, VoteCategorization
from arena.play.base import ArenaError
from arena.ratings.refit import snapshots_refit
from arena.votes.selectors import _names_table, _read_orm, votes_counted_columns
from evalcore.categories import agreement, load_category_protocol, prompt_sha256
from evalcore.ratings import aggregate, battles_from_arrays, bootstrap_bradley_terry
from evalcore.ratings.provisional import mark_provisional
from tests.arena.vote_data import votes_create
from tests.evalcore.categories.conftest import MIXED, PROMPTS
from tests.evalcore.models._shared import smollm2_backend
from tests.midp_reference import midp

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 0.8, "beta": 0.0, "gamma": -0.8}
ROUNDS = 30


@pytest.fixture(scope="module")
def tagger_backend(smollm2_dir):
    return smollm2_backend(str(smollm2_dir))


@pytest.fixture
def configured(settings, smollm2_dir, tmp_path):
    """The tagger (SmolLM2) with two protocols: one that splits these prompts, and the bundled coding one
    (on which SmolLM2 says no to every prompt here)."""
    mixed = tmp_path / "mentions-code.yaml"
    mixed.write_text(yaml.safe_dump(MIXED), encoding="utf-8")
    settings.ARENA_CATEGORY_TAGGER = {
        "backend": "hf",
        "model_args": {"path": str(smollm2_dir), "dtype": "float32"},
    }
    settings.ARENA_CATEGORY_PROTOCOLS = [str(mixed), "coding"]
    return mixed


class Loader:
    """Hands the tagger to the service and counts the loads (a re-run from the cache loads nothing)."""

    def __init__(self, backend):
        self.backend, self.loads = backend, 0

    def __call__(self):
        self.loads += 1
        return self.backend


def votes_with_prompts(n: int, *, seed: int = 0) -> list[Vote]:
    votes = votes_create(STRENGTHS, n, seed=seed)
    Turn.objects.bulk_create(
        Turn(battle_id=v.battle_id, index=0, prompt=PROMPTS[k % len(PROMPTS)], answer_a="a", answer_b="b",
             status_a=Turn.SideStatus.DONE, status_b=Turn.SideStatus.DONE)
        for k, v in enumerate(votes)
    )  # fmt: skip
    return votes


def drain(loader, *, batch: int = 16) -> list[dict]:
    runs = []
    while True:
        runs.append(votes_categorize(loader, batch=batch))
        if not runs[-1]["claimed"]:
            return runs


def test_every_vote_is_tagged_once_per_prompt_and_a_rerun_costs_nothing(configured, tagger_backend):
    votes_with_prompts(40)
    loader = Loader(tagger_backend)
    runs = drain(loader)
    assert sum(r["claimed"] for r in runs) == 40 and sum(r["done"] for r in runs) == 40
    assert sum(r["tagged"] for r in runs) == 16  # 8 distinct prompts x 2 protocols: each tagged once
    assert VoteCategorization.objects.filter(status="done").count() == 40
    tags = PromptTag.objects.all()
    assert tags.count() == 16
    mixed, coding = load_category_protocol(configured), load_category_protocol("coding")
    for tag in tags:
        protocol = mixed if tag.category == "mentions_code" else coding
        assert (tag.protocol, tag.protocol_version, tag.protocol_sha256) == (
            protocol.name,
            protocol.version,
            protocol.sha256,
        )
        assert tag.tagger.startswith("hf:") and tag.tagger_name.startswith("hf:")
        assert tag.value is (tag.score >= protocol.threshold)
        assert set(tag.criteria["answers"]) == {c.name for c in protocol.criteria}
    assert {t.value for t in tags.filter(category="mentions_code")} == {True, False}
    assert not tags.filter(category="coding", value=True).exists()  # SmolLM2 says no to all of them

    VoteCategorization.objects.update(status="pending")  # as if every vote had to be tagged again
    again = drain(loader)
    # Three batches of 16 votes, each holding all 8 prompts under both protocols: 48 verdicts read, none made.
    assert sum(r["tagged"] for r in again) == 0 and sum(r["cached"] for r in again) == 48
    assert PromptTag.objects.count() == 16 and VoteCategorization.objects.filter(status="done").count() == 40


def test_new_votes_join_later_batches_and_nothing_waits_without_a_tagger(
    settings, configured, tagger_backend
):
    votes_with_prompts(6)
    loader = Loader(tagger_backend)
    drain(loader)
    votes_with_prompts(3, seed=9)
    assert drain(loader)[0] == {"claimed": 3, "tagged": 0, "cached": 6, "failed_tags": 0, "done": 3, "failed": 0,
                                "enlisted": 3}  # fmt: skip
    settings.ARENA_CATEGORY_TAGGER = None
    assert votes_categorize(Loader(None))["claimed"] == 0


def test_failed_tags_are_kept_retried_then_given_up_and_put_back_by_staff(
    settings, configured, tmp_path, tagger_backend
):
    generating = tmp_path / "generated.yaml"
    generating.write_text(yaml.safe_dump({**MIXED, "verdict": {"method": "generate", "max_new_tokens": 3,
                                                                "criteria": [{"name": "code"}]}}))  # fmt: skip
    settings.ARENA_CATEGORY_PROTOCOLS = [str(generating)]
    votes_with_prompts(2)
    loader = Loader(tagger_backend)
    first = votes_categorize(loader, batch=8, max_attempts=2)
    # Three tokens never hold "code: yes": each tag fails, is recorded on the vote, and nothing is cached.
    assert first["failed_tags"] == 2 and first["done"] == 0 and first["failed"] == 0
    row = VoteCategorization.objects.first()
    assert row.status == "pending" and "no line 'code: yes'" in row.error and row.attempts == 1
    assert PromptTag.objects.count() == 0
    second = votes_categorize(loader, batch=8, max_attempts=2)
    assert second["failed"] == 2 and VoteCategorization.objects.filter(status="failed").count() == 2
    assert votes_categorize(loader, batch=8, max_attempts=2)["claimed"] == 0
    assert (
        categorizations_retry() == 2
        and VoteCategorization.objects.filter(status="pending", attempts=0).count() == 2
    )


def test_each_tagged_category_gets_its_own_fits_and_too_few_votes_none(configured, tagger_backend):
    votes = votes_with_prompts(120, seed=4)
    drain(Loader(tagger_backend), batch=64)
    summary = snapshots_refit(rounds=ROUNDS, seed=2, min_category_votes=10)
    assert summary["skipped"] is False
    in_category = set(
        PromptTag.objects.filter(category="mentions_code", value=True).values_list("prompt_sha256", flat=True)
    )
    tagged = [v for k, v in enumerate(votes) if prompt_sha256(PROMPTS[k % len(PROMPTS)]) in in_category]
    assert 10 <= len(tagged) < 120
    for method in ("bt", "style", "elo"):
        snap = RatingSnapshot.objects.get(method=method, category="mentions_code")
        assert snap.vote_count == len(tagged)
        assert snap.settings["tags"]["protocol"] == "mentions-code"
        assert snap.settings["tags"]["protocol_version"] == "test-1"
        assert snap.settings["tags"]["tagger"].startswith("hf:")
    assert not RatingSnapshot.objects.filter(category="coding").exists()  # no vote in it: not shown
    assert RatingSnapshot.objects.get(method="style", category="mentions_code").extra["coefficients"]

    battles = battles_from_arrays([v.model_a.name for v in tagged], [v.model_b.name for v in tagged],
                                  [v.winner for v in tagged])  # fmt: skip
    counts = aggregate(battles)
    expected = mark_provisional(bootstrap_bradley_terry(counts, rounds=ROUNDS, rng=np.random.default_rng(2)),
                                counts, min_battles=300)  # fmt: skip
    rows = {r["model"]: r for r in RatingSnapshot.objects.get(method="bt", category="mentions_code").rows}
    for want in expected.to_rows():
        for key in ("rating", "ci_low", "ci_high"):
            if want[key] is None:
                assert rows[want["model"]][key] is None
            else:
                assert rows[want["model"]][key] == pytest.approx(want[key], abs=1e-4)

    # New tags alone (no new vote) change the fingerprint: the next refit is not skipped.
    assert snapshots_refit(rounds=ROUNDS, seed=2, min_category_votes=10)["skipped"] is True
    PromptTag.objects.filter(category="mentions_code").update(value=True)
    assert snapshots_refit(rounds=ROUNDS, seed=2, min_category_votes=10)["skipped"] is True  # same count/ids
    VoteCategorization.objects.filter(pk=VoteCategorization.objects.first().pk).update(status="pending")
    assert snapshots_refit(rounds=ROUNDS, seed=2, min_category_votes=10)["skipped"] is False
    assert RatingSnapshot.objects.filter(category="mentions_code").latest("id").vote_count == 120


def test_tag_masks_follow_the_vote_ids_in_vote_order(configured, tagger_backend):
    votes_with_prompts(16)
    drain(Loader(tagger_backend))
    columns = votes_counted_columns()  # PostgreSQL's packed reader
    in_order = list(
        Vote.objects.filter(counted=True).order_by("created_at", "id").values_list("id", flat=True)
    )
    assert columns.vote_id.tolist() == in_order
    assert _read_orm(_names_table()[1])["vote_id"].tolist() == in_order  # SQLite's reader, on the same votes
    masks, made_by = tag_masks(columns)
    assert set(masks) == {"mentions_code", "coding"} and made_by["coding"]["protocol"] == "coding"
    by_vote = dict(VoteCategorization.objects.values_list("vote_id", "prompt_sha256"))
    yes = set(
        PromptTag.objects.filter(category="mentions_code", value=True).values_list("prompt_sha256", flat=True)
    )
    assert [by_vote[int(i)] in yes for i in columns.vote_id] == masks["mentions_code"].tolist()
    assert not masks["coding"].any()


@pytest.fixture
def published(settings, configured, tagger_backend):
    """Tagged votes whose battles are published (moderated, covered by a refit, no delay)."""
    from arena.tasks import ratings_refit

    settings.ARENA_PUBLISH_DELAY_S = 0
    votes_with_prompts(24, seed=6)
    drain(Loader(tagger_backend))
    ratings_refit()  # moderates and redacts what it publishes
    snapshots_refit(rounds=ROUNDS, min_category_votes=5, force=True)  # 24 votes: a small category's fits
    staff = get_user_model().objects.create_user("checker", password="pw-checker-1", is_staff=True)
    return staff


def test_staff_check_published_tags_and_the_agreement_has_a_midp_interval(published, settings):
    sample = tags_sample("mentions_code", seed=1)
    assert len(sample) == 8  # every distinct prompt of the category's tags, all published
    assert {item["prompt"] for item in sample} <= set(PROMPTS)
    pairs = []
    for k, item in enumerate(sample):
        said = item["tag"].value if k % 4 else not item["tag"].value  # staff disagree with every fourth
        tag_review_record(tag_id=item["tag"].pk, reviewer=published, value=said)
        pairs.append((item["tag"].value, said))
    tag_review_record(
        tag_id=sample[0]["tag"].pk, reviewer=published, value=sample[0]["tag"].value
    )  # changed mind
    pairs[0] = (sample[0]["tag"].value, sample[0]["tag"].value)
    assert TagReview.objects.count() == 8
    found = category_agreement("mentions_code")
    want = agreement(pairs)
    assert (found["n"], found["agree"]) == (8, 7)
    for key in ("value", "ci_low", "ci_high"):
        assert found[key] == pytest.approx(want[key], abs=1e-12)
    assert 0 < found["ci_low"] < 0.875 < found["ci_high"] <= 1
    assert (found["ci_low"], found["ci_high"]) == pytest.approx(midp(7, 8), abs=1e-4) and found["interval"] == "mid-p"

    api = Client().get("/api/ratings/?category=mentions_code")
    assert api.status_code == 200 and api.json()["category"] == "mentions_code"
    board = Client().get("/leaderboard/arena/?category=mentions_code")
    assert board.status_code == 200
    html = board.content.decode()
    assert "Agreement with staff: 88% of 8 checked prompts" in html
    assert f"95% mid-p interval {round(100 * found['ci_low'])}–{round(100 * found['ci_high'])}%" in html
    assert "protocol mentions-code version test-1" in html
    counts = RatingSnapshot.objects.get(method="bt", category="mentions_code").vote_count
    assert f'<option value="mentions_code" selected>Mentions code ({counts} votes)</option>' in html
    # Configured, too few votes for ratings: offered all the same, with its votes and the refit's minimum.
    assert re.search(r'<option value="coding">Coding \(\d+ votes?; ratings from 5\)</option>', html)


def test_only_published_prompts_reach_staff_and_bad_checks_are_refused(published, settings):
    tag = PromptTag.objects.filter(category="mentions_code").first()
    with pytest.raises(ArenaError, match="yes or no"):
        tag_review_record(tag_id=tag.pk, reviewer=published, value="yes")
    visitor = get_user_model().objects.create_user("visitor", password="pw-visitor-1")
    with pytest.raises(ArenaError, match="Only staff"):
        tag_review_record(tag_id=tag.pk, reviewer=visitor, value=True)
    with pytest.raises(ArenaError, match="No such tag"):
        tag_review_record(tag_id=10**9, reviewer=published, value=True)
    settings.ARENA_PUBLISH_DELAY_S = 10**8  # nothing is published any more
    assert tags_sample("mentions_code") == []
    with pytest.raises(ArenaError, match="No such tag among published prompts"):
        tag_review_record(tag_id=tag.pk, reviewer=published, value=True)
    assert TagReview.objects.count() == 0


def test_the_staff_page_samples_confirms_and_corrects(published):
    anonymous = Client()
    assert anonymous.get("/leaderboard/review/categories/").status_code == 302
    visitor = Client()
    visitor.force_login(get_user_model().objects.create_user("nosy", password="pw-nosy-12"))
    assert visitor.get("/leaderboard/review/categories/?category=mentions_code").status_code == 404
    staff = Client()
    staff.force_login(published)
    page = staff.get("/leaderboard/review/categories/?category=mentions_code&seed=3")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('class="tag-check"') == 8 and "Write a poem about autumn rain." in html
    scores = set(PromptTag.objects.filter(category="mentions_code").values_list("score", flat=True))
    assert 1 in scores  # one criterion answered yes: said in the singular
    assert "(1 criterion yes: code yes)" in html and "1 criteria" not in html
    tag = PromptTag.objects.filter(category="mentions_code").order_by("id").first()
    done = staff.post("/leaderboard/review/categories/",
                      {"tag": tag.pk, "value": "no", "category": "mentions_code", "seed": 3})  # fmt: skip
    assert done.status_code == 302 and done["Location"].endswith("?category=mentions_code&seed=3")
    assert TagReview.objects.get(tag=tag).value is False
    hostile = [
        ({"tag": tag.pk, "value": "maybe", "category": "mentions_code"}, 400, "value"),
        ({"tag": "1; DROP TABLE", "value": "yes", "category": "mentions_code"}, 400, "tag"),
        ({"tag": tag.pk, "value": "yes", "category": "overall"}, 400, "category"),
        ({"tag": 10**30, "value": "yes", "category": "mentions_code"}, 400, "tag"),
        ({"tag": 10**9, "value": "yes", "category": "mentions_code"}, 404, "No such tag"),
    ]
    for data, status, message in hostile:
        refused = staff.post("/leaderboard/review/categories/", data)
        assert refused.status_code == status and message in refused.content.decode(), data
    assert staff.get("/leaderboard/review/categories/?category=nope").status_code == 400
    assert staff.get("/leaderboard/review/categories/?category=coding&seed=-1").status_code == 400
    assert TagReview.objects.count() == 1 and TagReview.objects.get(tag=tag).value is False


def test_the_task_tags_every_vote_then_asks_for_a_refit(configured, settings, celery_eager):
    from arena.play.dispatch import CATEGORIES_PENDING_KEY, categories_tag_schedule
    from arena.tasks import categories_tag

    settings.ARENA_CATEGORY_BATCH = 4
    settings.ARENA_REFIT_ROUNDS = 20
    votes = votes_with_prompts(12)
    orphan = votes_create(STRENGTHS, 1, seed=8)[
        0
    ]  # a vote whose battle has no turn: failed, not retried forever
    # A run waiting in a busy judge queue holds the key until it starts: later votes queue no other.
    cache.add(CATEGORIES_PENDING_KEY, 1, timeout=600)
    assert categories_tag_schedule() is False
    totals = categories_tag()
    assert cache.get(CATEGORIES_PENDING_KEY) is None  # cleared as the run started
    assert totals["refit_scheduled"] is True
    # In batches of four, then the refit it asks for (run in place here, as every task sent).
    assert VoteCategorization.objects.filter(status="done").count() == len(votes)
    failed = VoteCategorization.objects.get(vote=orphan)
    assert failed.status == "failed" and failed.error == "the battle has no first prompt"
    assert RatingSnapshot.objects.filter(category="overall").exists()  # the refit ran
    settings.ARENA_CATEGORY_TAGGER = None
    assert categories_tag() == {"skipped": "no tagger configured (ARENA_CATEGORY_TAGGER)"}


def test_the_django_admin_lists_tags_and_the_queue_read_only(configured, tagger_backend, client):
    votes_with_prompts(4)
    drain(Loader(tagger_backend))
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root-123")
    client.force_login(admin)
    for name in ("prompttag", "votecategorization"):
        page = client.get(f"/admin/arena/{name}/")
        assert page.status_code == 200
        assert ("mentions_code" if name == "prompttag" else "done") in page.content.decode()
        assert client.get(f"/admin/arena/{name}/add/").status_code == 403
    tag = PromptTag.objects.first()
    assert client.post(f"/admin/arena/prompttag/{tag.pk}/delete/", {"post": "yes"}).status_code == 403
    assert PromptTag.objects.filter(pk=tag.pk).exists()
