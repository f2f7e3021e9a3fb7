"""The refit cache (arena.votes.cache): a read through it equals a full read, whatever happened to the
votes in between, and it is only used when it provably holds what the database would send."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection, transaction
from django.utils import timezone

from arena.models import RatingSnapshot, Vote
from arena.ratings.inputs import consistent_read
from arena.ratings.refit import snapshots_refit
from arena.votes import cache as vote_cache
from arena.votes import columns as vote_columns
from arena.votes import selectors
from tests.arena.vote_data import T0, votes_create

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = (
    "a",
    "b",
    "outcome",
    "tstamp",
    "turn_count",
    "prompt_tokens",
    "language_code",
    "style_a",
    "style_b",
)


@pytest.fixture
def cache_dir(tmp_path, settings):
    if connection.vendor != "postgresql":
        pytest.fail("the refit cache is PostgreSQL's: run the suite with `make test`")
    settings.ARENA_REFIT_CACHE_DIR = tmp_path / "refit-cache"
    return settings.ARENA_REFIT_CACHE_DIR


@pytest.fixture
def chunk_reads(monkeypatch):
    """The id ranges the database was asked for, one (low, high) per read."""
    asked: list[tuple[int, int]] = []
    real = vote_columns._chunks

    def spy(conn, fields, params, low, high):
        asked.append((low, high))
        return real(conn, fields, params, low, high)

    monkeypatch.setattr(vote_columns, "_chunks", spy)
    monkeypatch.setattr(vote_columns, "CHUNK_IDS", 16)  # several chunks, some of them empty
    return asked


def refit_read(settings, *, cache: bool = True):
    """The columns a refit reads (its own REPEATABLE READ snapshot), with or without the cache."""
    saved = settings.ARENA_REFIT_CACHE_DIR
    if not cache:
        settings.ARENA_REFIT_CACHE_DIR = None
    try:
        with consistent_read():
            return selectors.votes_counted_columns()
    finally:
        settings.ARENA_REFIT_CACHE_DIR = saved


def assert_same(cached, full) -> None:
    assert len(cached) == len(full)
    assert cached.languages == full.languages and cached.names == full.names
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(cached, name), getattr(full, name), err_msg=name)
    pairs = set(zip(cached.prompt_code.tolist(), full.prompt_code.tolist()))  # codes may be renumbered
    assert len(pairs) == len(set(full.prompt_code.tolist()))


def state_of(directory) -> vote_cache.CacheState:
    state = vote_cache.VoteCache(directory, vote_columns.LAYOUT).state()
    assert state is not None
    return state


def more_votes(n: int, *, seed: int, start=T0 + timedelta(days=1), **kw):
    return votes_create({"alpha": 0.4, "beta": 0.0, "gamma": -0.3, "delta": 0.1}, n, seed=seed, start=start,
                        language=["en", "de"], turn_count=[1, 2], prompt_tokens=[12, 700], **kw)  # fmt: skip


def test_second_read_asks_only_for_new_votes_and_equals_a_full_read(cache_dir, settings, chunk_reads):
    first = more_votes(50, seed=1)
    assert_same(refit_read(settings), refit_read(settings, cache=False))
    state = state_of(cache_dir)
    assert state.count == 50 and state.upto == first[-1].pk
    more_votes(30, seed=2, start=T0 + timedelta(days=2))
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads == [(first[-1].pk + 1, max(Vote.objects.values_list("id", flat=True)))]
    assert_same(cached, refit_read(settings, cache=False))
    assert state_of(cache_dir).count == 80
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads == []  # nothing new: no chunk asked for
    assert_same(cached, refit_read(settings, cache=False))


@pytest.mark.parametrize(
    "change",
    ["uncount", "restyle", "delete", "relanguage", "retime"],
)
def test_a_changed_or_deleted_vote_makes_the_read_full(cache_dir, settings, chunk_reads, change):
    votes = more_votes(60, seed=4)
    refit_read(settings)
    target = Vote.objects.filter(pk=votes[7].pk)
    if change == "uncount":
        target.update(counted=False, excluded_reason="identity_revealed")
    elif change == "restyle":
        target.update(style_a={"tokens": 999, "headers": 9, "list_items": 9, "bold": 9})
    elif change == "delete":
        target.delete()
    elif change == "relanguage":
        target.update(language="de")  # an existing language: the list of languages stays the same
    else:
        target.update(created_at=T0 - timedelta(days=3))
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads and chunk_reads[0][0] == votes[0].pk, "the read did not start from the first vote"
    assert_same(cached, refit_read(settings, cache=False))


def test_a_late_vote_below_the_kept_ids_makes_the_read_full(cache_dir, settings, chunk_reads):
    """A vote committed after the refit's snapshot with an id below the last one kept (a slow commit, a
    bulk load with explicit ids): the count of covered ids disagrees, so everything is read again."""
    votes = more_votes(30, seed=5)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('arena_vote', 'id'), %s)", [votes[-1].pk + 100])
    later = more_votes(10, seed=6, start=T0 + timedelta(days=2))
    refit_read(settings)
    assert state_of(cache_dir).upto == later[-1].pk
    with connection.cursor() as cursor:  # the next vote takes an id from the gap below the kept ones
        cursor.execute("SELECT setval(pg_get_serial_sequence('arena_vote', 'id'), %s)", [votes[-1].pk + 49])
    late = votes_create({"alpha": 0.0, "beta": 0.0}, 1, seed=7, start=T0 + timedelta(days=3))[0]
    assert late.pk == votes[-1].pk + 50
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads[0][0] == votes[0].pk
    assert_same(cached, refit_read(settings, cache=False))
    assert len(cached) == 41


def test_young_votes_are_read_again_not_kept(cache_dir, settings, chunk_reads):
    old = more_votes(20, seed=8)
    more_votes(5, seed=9, start=timezone.now() - timedelta(seconds=5))
    refit_read(settings)
    state = state_of(cache_dir)  # the old votes only
    assert (state.count, state.upto) == (20, old[-1].pk)
    chunk_reads.clear()
    assert_same(refit_read(settings), refit_read(settings, cache=False))
    assert chunk_reads[0][0] == old[-1].pk + 1


def test_a_new_language_is_added_to_the_kept_list_not_a_full_read(cache_dir, settings, chunk_reads):
    """The files hold languages as indices into the list as it was; a new language goes to its end, and
    the reader still gives codes into the sorted list."""
    votes = more_votes(20, seed=10)
    refit_read(settings)
    extra = votes_create({"alpha": 0.0, "beta": 0.0}, 5, seed=11, start=T0 + timedelta(days=2), language="cs")
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads == [(votes[-1].pk + 1, extra[-1].pk)]
    assert cached.languages == ("cs", "de", "en") and len(cached) == 25
    assert_same(cached, refit_read(settings, cache=False))
    assert state_of(cache_dir).languages == ("de", "en", "cs")
    more_votes(5, seed=19, start=T0 + timedelta(days=3))
    assert_same(refit_read(settings), refit_read(settings, cache=False))


def test_arrays_of_an_earlier_read_stay_valid_when_the_files_are_written_anew(cache_dir, settings):
    """The columns are the files mapped copy-on-write: a new generation gets new files (the old ones are
    unlinked, not truncated), and the earlier read's arrays keep their values."""
    votes = more_votes(30, seed=20)
    earlier = refit_read(settings)
    expected = [getattr(earlier, name).copy() for name in COLUMNS]
    Vote.objects.filter(pk=votes[3].pk).update(winner="tie")  # a change: the next read writes anew
    generation = state_of(cache_dir).generation
    later = refit_read(settings)
    assert state_of(cache_dir).generation != generation
    assert not list(cache_dir.glob(f"{generation}-*.bin"))
    for name, values in zip(COLUMNS, expected):
        np.testing.assert_array_equal(getattr(earlier, name), values, err_msg=name)
    assert_same(later, refit_read(settings, cache=False))


def test_another_boot_means_a_full_read(cache_dir, settings, chunk_reads, tmp_path, monkeypatch):
    """The files are not fsynced: after a reboot (another boot id) they are not trusted."""
    boot = tmp_path / "boot_id"
    boot.write_text("first-boot\n")
    monkeypatch.setattr(vote_cache, "BOOT_ID", boot)
    votes = more_votes(20, seed=21)
    refit_read(settings)
    boot.write_text("second-boot\n")
    chunk_reads.clear()
    assert_same(refit_read(settings), refit_read(settings, cache=False))
    assert chunk_reads[0][0] == votes[0].pk
    boot.unlink()  # no boot id to be had: no cache at all
    chunk_reads.clear()
    refit_read(settings)
    assert chunk_reads[0][0] == votes[0].pk


@pytest.mark.parametrize("damage", ["short", "ids", "state", "token", "query"])
def test_damaged_or_foreign_files_are_not_used(cache_dir, settings, chunk_reads, damage, monkeypatch):
    votes = more_votes(40, seed=12)
    refit_read(settings)
    state = state_of(cache_dir)
    if damage == "short":
        with open(cache_dir / f"{state.generation}-style_a.bin", "r+b") as handle:
            handle.truncate(32 * (state.count - 1))
    elif damage == "ids":  # a file changed behind its state: the kept ids no longer add up
        with open(cache_dir / f"{state.generation}-id.bin", "r+b") as handle:
            handle.write(np.array([123456789], dtype=np.int64).tobytes())
    elif damage == "state":
        (cache_dir / "state.json").write_text("{not json")
    elif damage == "token":  # files of another database (a restored copy, another deployment)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE arena_vote_cache_key SET token = %s", [str(uuid.uuid4())])
    else:  # the query changed (a new release): its hash differs
        monkeypatch.setattr(vote_cache, "query_hash", lambda sql, fields: "another query")
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads[0][0] == votes[0].pk
    assert_same(cached, refit_read(settings, cache=False))
    assert state_of(cache_dir).count == 40  # written anew


def test_another_refit_holding_the_folder_means_a_plain_read(cache_dir, settings, chunk_reads):
    votes = more_votes(30, seed=13)
    refit_read(settings)
    more_votes(5, seed=14, start=T0 + timedelta(days=2))
    with vote_cache.VoteCache(cache_dir, vote_columns.LAYOUT).locked() as held:
        assert held
        chunk_reads.clear()
        cached = refit_read(settings)
    assert chunk_reads[0][0] == votes[0].pk
    assert state_of(cache_dir).count == 30  # left as it was
    assert_same(cached, refit_read(settings, cache=False))


def test_not_used_outside_a_clean_snapshot(cache_dir, settings, chunk_reads):
    """Read committed (each statement its own snapshot) or a transaction that wrote: no cache, no files."""
    more_votes(10, seed=15)
    selectors.votes_counted_columns()  # autocommit: READ COMMITTED
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        Vote.objects.filter(pk=-1).update(counted=False)  # changes no row, but the trigger writes its log
        selectors.votes_counted_columns()
    assert not (cache_dir / "state.json").exists()
    refit_read(settings)
    assert (cache_dir / "state.json").exists()


def newest_snapshots() -> dict:
    newest: dict = {}
    for snapshot in RatingSnapshot.objects.order_by("id"):
        newest[(snapshot.method, snapshot.category)] = (snapshot.vote_count, snapshot.rows)
    return newest


def test_refit_snapshots_equal_with_and_without_the_cache(cache_dir, settings):
    more_votes(120, seed=16)
    snapshots_refit(rounds=20, elo_orders=0, force=True)
    more_votes(40, seed=17, start=T0 + timedelta(days=2))
    snapshots_refit(rounds=20, elo_orders=0, force=True)
    with_cache = newest_snapshots()
    assert state_of(cache_dir).count == 160
    settings.ARENA_REFIT_CACHE_DIR = None
    snapshots_refit(rounds=20, elo_orders=0, force=True)
    without = newest_snapshots()
    assert with_cache.keys() == without.keys() and len(with_cache) >= 9
    for key in with_cache:
        if key[0] != "style":
            assert with_cache[key] == without[key], key
            continue
        # Style fits start from the last refit's fit: the same optimum, to the fit's own tolerance.
        (count, kept), (count_without, fresh) = with_cache[key], without[key]
        assert count == count_without and [r["model"] for r in kept] == [r["model"] for r in fresh]
        for a, b in zip(kept, fresh):
            assert a["rating"] == pytest.approx(b["rating"], abs=1e-4), key


def test_a_change_after_the_log_was_emptied_by_hand_is_still_seen(cache_dir, settings, chunk_reads):
    """The log's row count alone could come back to the stored one after rows were deleted from it and
    as many changes were made; its largest id cannot."""
    votes = more_votes(20, seed=18)
    Vote.objects.filter(pk=votes[0].pk).update(winner=votes[0].winner)  # at least one row in the log
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM arena_vote_changes")
        logged = cursor.fetchone()[0]
    refit_read(settings)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM arena_vote_changes")
    for k in range(logged):
        Vote.objects.filter(pk=votes[k % len(votes)].pk).update(winner="tie")
    chunk_reads.clear()
    cached = refit_read(settings)
    assert chunk_reads[0][0] == votes[0].pk
    assert_same(cached, refit_read(settings, cache=False))


@pytest.fixture
def small_disk(small_filesystem):
    """A 64 KiB filesystem."""
    return small_filesystem("64k")


def test_a_full_disk_leaves_the_refit_reading_every_vote(
    cache_dir, settings, small_disk, chunk_reads, caplog
):
    """The folder's disk fills up while the columns are written: the read still gives every vote (from
    the database), no state is left that a later refit could trust, and once there is room again the
    cache is written and used."""
    settings.ARENA_REFIT_CACHE_DIR = small_disk / "refit-cache"
    votes = more_votes(1500, seed=30)  # ~180 KB of columns: more than the disk holds
    cached = refit_read(settings)
    assert "No space left on device" in caplog.text and "reading every vote" in caplog.text
    assert_same(cached, refit_read(settings, cache=False))
    assert vote_cache.VoteCache(settings.ARENA_REFIT_CACHE_DIR, vote_columns.LAYOUT).state() is None
    settings.ARENA_REFIT_CACHE_DIR = cache_dir  # room again
    refit_read(settings)
    more_votes(10, seed=31, start=T0 + timedelta(days=20))
    chunk_reads.clear()
    assert_same(refit_read(settings), refit_read(settings, cache=False))
    assert chunk_reads[0][0] == votes[-1].pk + 1
