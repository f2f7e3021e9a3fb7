"""The live board: incremental pair counts agree with a full aggregation, the live fit is evalcore's
point fit on them, and the task debounces and runs one at a time."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from arena.models import LiveRating, PairCountBase, Vote
from arena.ratings import inputs as refit_read
from arena.ratings import live
from arena.ratings import selectors as rating_selectors
from arena.ratings.draft import categories_of, category_battles
from arena.ratings.refit import snapshots_refit
from arena.votes import selectors
from evalcore.ratings import aggregate, fit_bradley_terry
from tests.arena.vote_data import votes_create
from tests.conftest import celery_eager_tasks

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 1.0, "beta": 0.3, "gamma": -0.4, "delta": -1.0}
ROUNDS = 10
LANGS = ["en", "en", "de", "fr"]


def full_counts() -> dict:
    """Every category aggregated from scratch over the counted votes, as the refit reads them."""
    votes = selectors.votes_counted_columns()
    return {c: aggregate(category_battles(votes, m)) for c, m in categories_of(votes, 1).items() if m.any()}


def assert_same(a, b):
    assert a.models == b.models
    key = lambda c: sorted(zip(c.i.tolist(), c.j.tolist(), *(x.tolist() for x in c.cells().T)))  # noqa: E731
    assert key(a) == key(b)


def test_live_counts_agree_with_a_full_aggregation_before_and_after_a_refit():
    votes_create(STRENGTHS, 120, seed=1, language=LANGS, turn_count=[1, 2, 1], prompt_tokens=[20, 600])
    counts = live.live_counts()  # no refit yet: every vote comes from SQL
    full = full_counts()
    for category, expected in full.items():
        assert_same(counts.counts[category], expected)
    snapshots_refit(rounds=ROUNDS, min_category_votes=10)
    assert PairCountBase.objects.get(category="overall").vote_count == 120
    votes_create(STRENGTHS, 80, seed=2, language=["en", "ja"], turn_count=[2, 1], prompt_tokens=[700, 5],
                 start=selectors.votes_counted_columns().last_vote_at)  # fmt: skip
    counts = live.live_counts()
    assert counts.base_high_water > 0 and counts.high_water == Vote.objects.order_by("-id")[0].id
    full = full_counts()
    assert set(full) <= set(counts.counts)
    assert "language:ja" in full  # a category the refit never saw: only in the votes after it
    for category, expected in full.items():
        assert_same(counts.counts[category], expected)
        assert counts.votes[category] == int(expected.total.sum())


def test_live_fit_right_after_a_refit_is_the_refits_point_rating():
    votes_create(STRENGTHS, 300, seed=3)
    snapshots_refit(rounds=ROUNDS)
    live.live_refit()
    got = {r["model"]: r["rating"] for r in LiveRating.objects.get(category="overall").rows}
    snap = {r["model"]: r["rating"] for r in rating_selectors.snapshot_latest("bt", "overall").rows}
    assert got.keys() == snap.keys()
    for name in got:
        assert got[name] == pytest.approx(snap[name], abs=1e-4)


def test_live_fit_stores_evalcores_numbers_on_the_same_counts():
    votes_create(STRENGTHS, 200, seed=4, language=LANGS)
    snapshots_refit(rounds=ROUNDS)
    votes_create(STRENGTHS, 60, seed=5, start=selectors.votes_counted_columns().last_vote_at)
    summary = live.live_refit(min_category_votes=10)
    assert summary["votes"] == 260
    for category, expected in full_counts().items():
        row = LiveRating.objects.get(category=category)
        fit = fit_bradley_terry(expected, ties="half")
        want = dict(zip(fit.models, fit.ratings.tolist()))
        assert row.vote_count == int(expected.total.sum())
        assert [r["model"] for r in row.rows] == sorted(want, key=lambda m: -want[m])
        for r in row.rows:
            assert r["rating"] == pytest.approx(want[r["model"]], abs=1e-4)
    # too few votes in a category: no rows, and a note that says so
    assert LiveRating.objects.get(category="multi_turn").rows == []
    assert "too few votes" in LiveRating.objects.get(category="multi_turn").notes[0]


def test_exclusions_reach_the_live_counts_at_the_next_refit():
    votes = votes_create(STRENGTHS, 100, seed=6)
    snapshots_refit(rounds=ROUNDS)
    Vote.objects.filter(pk__in=[v.pk for v in votes[:10]]).update(counted=False, excluded_reason="voter_flagged")
    assert live.live_counts().votes["overall"] == 100  # read by the refit: stays until the next one
    snapshots_refit(rounds=ROUNDS)
    assert live.live_counts().votes["overall"] == 90


def test_a_vote_in_an_unknown_state_is_counted_as_the_refit_reads_it():
    """A winner outside Vote.Winner (written around the vote path) and a language no refit has seen."""
    votes_create(STRENGTHS, 60, seed=10)
    snapshots_refit(rounds=ROUNDS)
    odd = votes_create(STRENGTHS, 5, seed=11, language="xx", start=selectors.votes_counted_columns().last_vote_at)
    Vote.objects.filter(pk=odd[0].pk).update(winner="not-a-winner")
    counts = live.live_counts()
    full = full_counts()  # PostgreSQL's packed read: an unknown winner is a both-bad tie
    assert_same(counts.counts["overall"], full["overall"])
    assert_same(counts.counts["language:xx"], full["language:xx"])
    live.live_refit(min_category_votes=5)
    assert len(LiveRating.objects.get(category="language:xx").rows) >= 2


def test_a_disconnected_category_is_fitted_with_the_prior_and_a_note():
    votes_create(STRENGTHS, 40, seed=7, pairs=[("alpha", "beta"), ("gamma", "delta")])
    live.live_refit()
    row = LiveRating.objects.get(category="overall")
    assert len(row.rows) == 4 and "prior" in row.notes[0]  # two islands: the prior's fallback, noted


def test_settled_votes_are_grouped_once_per_process_and_newer_ones_each_time():
    """Votes older than the settling window are aggregated once and kept (live._SETTLED); newer ones
    are aggregated at each fit; both together agree with a full aggregation."""
    votes_create(STRENGTHS, 50, seed=12)  # vote times in 2025: settled
    snapshots_refit(rounds=ROUNDS)
    votes_create(STRENGTHS, 40, seed=13, start=selectors.votes_counted_columns().last_vote_at)
    assert_same(live.live_counts().counts["overall"], full_counts()["overall"])
    state = live._SETTLED["state"]
    assert state.upto == live.settled_high_water() > state.base[0]  # the 40 are in the cache now
    assert state.votes["overall"] == 50 + 40
    votes_create(STRENGTHS, 30, seed=14, start=timezone.now())  # just cast: not settled yet
    # Dated before the cached ones: the settled id does not move past them, so they are counted with
    # the fresh votes (exact either way).
    votes_create(STRENGTHS, 20, seed=15, start=selectors.votes_counted_columns().first_vote_at)
    counts = live.live_counts()
    assert_same(counts.counts["overall"], full_counts()["overall"])
    assert counts.votes["overall"] == 140 and live._SETTLED["state"].votes["overall"] == 90


@pytest.fixture
def eager_celery(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.ARENA_REFIT_ON_VOTE_MAX_VOTES = 0  # the live fit alone
    with celery_eager_tasks() as app:
        yield app


def test_task_debounces_and_steps_aside_while_another_runs(eager_celery):
    from arena.play.dispatch import LIVE_PENDING_KEY, ratings_live_schedule
    from arena.tasks import LIVE_RUNNING_KEY, ratings_live

    votes_create(STRENGTHS, 30, seed=8)
    cache.add(LIVE_RUNNING_KEY, 1, timeout=30)  # another fit holds the lock
    assert ratings_live_schedule() is True  # eager: the task ran at once, and stepped aside
    assert not LiveRating.objects.exists()
    assert cache.get(LIVE_PENDING_KEY) is not None  # left for the running fit's follow-up
    assert ratings_live_schedule() is False  # a fit is pending: this vote waits for it
    cache.delete(LIVE_RUNNING_KEY)
    assert ratings_live.apply().get()["votes"] == 30
    assert LiveRating.objects.get(category="overall").vote_count == 30
    assert cache.get(LIVE_PENDING_KEY) is None and cache.get(LIVE_RUNNING_KEY) is None
    assert ratings_live_schedule() is True  # the next vote schedules the next fit
    assert ratings_live.name == "arena.tasks.ratings_live" and ratings_live.declared_queue == "default"


@pytest.mark.django_db(transaction=True)
def test_concurrent_votes_are_all_counted():
    """Votes inserted from several connections while live fits run: the last fit counts every one."""
    votes_create(STRENGTHS, 20, seed=9)
    snapshots_refit(rounds=ROUNDS)
    errors = []

    def writer(seed):
        try:
            for k in range(5):  # vote times now, as the vote path writes them (see live.SETTLE_S)
                votes_create(STRENGTHS, 8, seed=seed * 100 + k, start=timezone.now())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        live.live_refit()
    for t in threads:
        t.join()
    assert not errors
    live.live_refit()
    assert LiveRating.objects.get(category="overall").vote_count == 20 + 4 * 5 * 8 == Vote.objects.count()
    assert_same(live.live_counts().counts["overall"], full_counts()["overall"])
    assert np.isfinite([r["rating"] for r in LiveRating.objects.get(category="overall").rows]).all()


def test_the_base_a_refit_stores_equals_one_made_from_the_votes_alone():
    """The refit hands the categories' pair counts it fitted to the live base; the base is the same as
    one that counts every category from the votes (languages below the threshold included)."""
    votes_create(STRENGTHS, 150, seed=9, language=["en", "en", "en", "de", "fr"], turn_count=[1, 2, 1],
                 prompt_tokens=[20, 600])  # fmt: skip
    snapshots_refit(rounds=20, min_category_votes=40)  # de and fr (30 votes each) are counted, not fitted
    stored = {row.category: (row.model_names, row.cells, row.vote_count) for row in PairCountBase.objects.all()}
    votes, integrity = refit_read.refit_votes_read(99.9)
    live.base_store(votes, high_water=integrity["vote_high_water"], refit_at=timezone.now())
    alone = {row.category: (row.model_names, row.cells, row.vote_count) for row in PairCountBase.objects.all()}
    assert stored == alone and {"language:en", "language:de", "language:fr", "multi_turn"} <= set(stored)


@pytest.mark.django_db(transaction=True)
def test_two_refits_writing_the_base_at_once_wait_for_each_other():
    """Two refits storing the live base at the same time (a refit lock that expired, a second scheduler):
    the second waits for the first to commit, then replaces its rows; neither breaks the unique
    category, as a plain delete-then-insert in both would."""
    if connection.vendor != "postgresql":
        pytest.fail("this checks PostgreSQL's locking: run the suite with `make test`")
    votes_create({"alpha": 0.5, "beta": 0.0, "gamma": -0.5}, 120, seed=41)
    votes = selectors.votes_counted_columns()
    first_stored, errors = threading.Event(), []

    def second():
        try:
            live.base_store(votes, high_water=2, refit_at=timezone.now())
        except Exception as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    with transaction.atomic():
        live.base_store(votes, high_water=1, refit_at=timezone.now())
        first_stored.set()
        thread = threading.Thread(target=second)
        thread.start()
        with connection.cursor() as cursor:  # wait until the second writer waits on the lock
            for _ in range(600):
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    break
                thread.join(0.05)
            else:
                pytest.fail("the second writer never waited for the first")
    thread.join(30)
    assert not errors, errors
    assert set(PairCountBase.objects.values_list("high_water", flat=True)) == {2}
    assert PairCountBase.objects.filter(category="overall").count() == 1
