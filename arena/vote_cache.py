"""The refit's packed vote columns kept on the worker's disk between refits (issue 16).

A refit at 10M votes spent 15-22 s having PostgreSQL pack every vote's columns again, though nearly all
of them were the votes it had packed for the last refit: votes are inserted, and changed or deleted only
by rare admin actions. This keeps the packed columns (:data:`arena.vote_columns.FIELDS`, as PostgreSQL
sent them, in id order) in one file per column under ``ARENA_REFIT_CACHE_DIR``, and a refit asks the
database only for the votes after the last one kept.

The files are used only when they hold exactly what the database would send in the refit's own snapshot:

- the same database and votes table: ``current_database()``, the table's OID (a restore makes a new
  table) and the random token that migration 0007 wrote in ``arena_vote_cache_key``;
- no vote updated or deleted since they were written: the number of rows of ``arena_vote_changes``,
  one added by statement-level triggers for each UPDATE, DELETE and TRUNCATE of ``arena_vote``, counted
  in the same snapshot (a statement committed after an earlier snapshot always adds to that count), and
  their largest id (so that rows deleted from the log by hand do not hide later ones);
- no vote among the ids they cover that they lack (a late commit, a bulk load with explicit ids): the
  number and the sum of the counted ids up to the last one kept, an index-only scan of
  ``arena_vote_counted_id``;
- the same query (a hash of its SQL) and the same list of languages (the packed field holds each vote's
  language as an index into that list);
- a state file and column files that agree (a write cut off half-way is never read).

Anything else, and the refit reads every vote as it would without the files, then writes them anew. The
newest minute of votes is never kept (:data:`YOUNG_S`): a vote still being committed gets a lower id than
one committed just before the refit's snapshot, and keeping the later one would make the next refit's
count disagree and read everything again. Only the refit's own read uses this: a reading transaction that
has written nothing, in one snapshot, with the default filter.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

VERSION = 1
YOUNG_S = 60  # votes younger than this (by created_at, against the snapshot's now()) are not kept
STATE = "state.json"
# The key of this database and votes table, and the change counter, as the refit's snapshot sees them.
KEY_SQL = """
SELECT current_database(), 'arena_vote'::regclass::oid::int8, k.token::text,
       (SELECT count(*) || ':' || coalesce(max(id), 0) FROM arena_vote_changes),
       (extract(epoch FROM now()) * 1e6)::int8 - 946684800000000 - %(young)s * 1000000
FROM arena_vote_cache_key k LIMIT 1"""
COVERED_SQL = "SELECT count(*), coalesce(sum(v.id), 0) FROM arena_vote v WHERE v.counted AND v.id <= %(upto)s"


class CacheError(Exception):
    """The column files do not hold what their state says (changed or cut behind it)."""


@dataclass(frozen=True)
class CacheState:
    """What the column files hold: ``count`` votes with ids up to ``upto`` (their sum ``id_sum``), packed
    by the query with hash ``query`` over ``languages``, read when the change counter was ``counter``."""

    version: int
    database: str
    table: int
    token: str
    query: str
    languages: tuple[str, ...]
    counter: str
    upto: int
    count: int
    id_sum: int


@dataclass(frozen=True)
class Snapshot:
    """The key and counter of the reading snapshot, and the time (PostgreSQL microseconds) before which a
    vote is old enough to keep."""

    database: str
    table: int
    token: str
    counter: str
    young_after: int


def query_hash(sql: str, fields: list) -> str:
    return hashlib.sha256(json.dumps([sql, [list(f) for f in fields]]).encode()).hexdigest()[:16]


def snapshot_read(cursor) -> Snapshot | None:
    """The reading transaction's key and counter, or None where the cache must not be used: outside a
    REPEATABLE READ snapshot, in a transaction that has written (its writes may yet roll back), or
    without the change counter (a database not migrated by PostgreSQL's path)."""
    cursor.execute(
        "SELECT current_setting('transaction_isolation'), pg_current_xact_id_if_assigned() IS NULL,"
        " to_regclass('arena_vote_cache_key') IS NOT NULL"
    )
    isolation, clean, counted = cursor.fetchone()
    if isolation not in ("repeatable read", "serializable") or not clean or not counted:
        return None
    cursor.execute(KEY_SQL, {"young": YOUNG_S})
    row = cursor.fetchone()
    if row is None:
        return None
    return Snapshot(str(row[0]), int(row[1]), str(row[2]), str(row[3]), int(row[4]))


class VoteCache:
    """One folder of column files and their state. Hold :meth:`locked` around a read and its write."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)

    @contextmanager
    def locked(self):
        """Yields True when this process holds the folder (another refit writing it: False, and the
        caller reads without the cache)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "lock", "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def state(self, fields: list) -> CacheState | None:
        """The stored state when it parses and every column file holds at least its votes."""
        try:
            raw = json.loads((self.directory / STATE).read_text())
            raw["languages"] = tuple(raw["languages"])
            state = CacheState(**raw)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if state.version != VERSION or state.count < 0:
            return None
        for name, *_ in fields:
            path = self.directory / f"{name}.bin"
            if not path.is_file() or path.stat().st_size < state.count * 8:
                return None
        return state

    def usable(self, cursor, state: CacheState | None, snapshot: Snapshot, query: str, languages) -> bool:
        """Whether ``state`` holds exactly the counted votes up to its last id in this snapshot."""
        if state is None or (state.database, state.table, state.token) != (
            snapshot.database,
            snapshot.table,
            snapshot.token,
        ):
            return False
        if state.counter != snapshot.counter or state.query != query or state.languages != tuple(languages):
            return False
        cursor.execute(COVERED_SQL, {"upto": state.upto})
        count, id_sum = cursor.fetchone()
        return (int(count), int(id_sum)) == (state.count, state.id_sum)

    def read_into(self, state: CacheState, out: dict[str, np.ndarray]) -> None:
        """The kept votes' columns into the first ``state.count`` places of each array of ``out``; the
        ids must sum to the state's (a file changed behind the state is refused)."""
        for name, values in out.items():
            view = memoryview(values[: state.count]).cast("B")
            with open(self.directory / f"{name}.bin", "rb") as handle:
                if handle.readinto(view) != view.nbytes:
                    raise CacheError(f"refit cache: {name}.bin is shorter than its state says")
        ids = out["id"][: state.count]
        if state.count and (int(ids.sum(dtype=np.int64)) != state.id_sum or int(ids[-1]) != state.upto):
            raise CacheError("refit cache: the kept ids do not match their state")

    def write(
        self, rows: dict[str, np.ndarray], *, old: CacheState | None, keep: int, new: CacheState
    ) -> None:
        """Keep the first ``keep`` votes of ``rows`` (in id order): append those after ``old.count`` to the
        files when ``old`` was usable, else write the files anew. The state file is replaced last, after
        the columns are on disk, so a write cut off leaves the old state (still true of the files' first
        ``old.count`` votes) or none."""
        start = old.count if old is not None else 0
        if old is None:
            (self.directory / STATE).unlink(missing_ok=True)
        for name, values in rows.items():
            path = self.directory / f"{name}.bin"
            with open(path, "r+b" if old is not None and path.exists() else "wb") as handle:
                handle.truncate(start * 8)
                handle.seek(start * 8)
                handle.write(memoryview(np.ascontiguousarray(values[start:keep])).cast("B"))
                handle.flush()
                os.fsync(handle.fileno())
        temporary = self.directory / f"{STATE}.partial"
        with open(temporary, "w") as handle:
            json.dump({**asdict(new), "languages": list(new.languages)}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.directory / STATE)
        descriptor = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


@dataclass
class Plan:
    """A refit's use of the cache, from the check to the write: ``old`` is the usable state (None: read
    every vote, then write the files anew)."""

    cache: VoteCache
    snapshot: Snapshot
    query: str
    languages: tuple[str, ...]
    old: CacheState | None

    @property
    def kept(self) -> int:
        return self.old.count if self.old is not None else 0

    def store(self, rows: dict[str, np.ndarray]) -> CacheState:
        """Keep ``rows``' votes (the kept ones first, then the new ones, each in id order) up to the first
        young new vote, and return the state written."""
        young = np.flatnonzero(rows["micros"][self.kept :] >= self.snapshot.young_after)
        keep = self.kept + int(young[0]) if young.size else len(rows["id"])
        ids = rows["id"][:keep]
        new = CacheState(
            version=VERSION, database=self.snapshot.database, table=self.snapshot.table,
            token=self.snapshot.token, query=self.query, languages=self.languages,
            counter=self.snapshot.counter, upto=int(ids[-1]) if keep else 0, count=keep,
            id_sum=int(ids.sum(dtype=np.int64)),
        )  # fmt: skip
        if new != self.old:
            self.cache.write(rows, old=self.old, keep=keep, new=new)
        return new


@contextmanager
def planned(cursor, directory, *, fields: list, sql: str, languages):
    """A :class:`Plan` for this snapshot while this process holds the folder, else None (no snapshot to
    trust, or another refit holding the folder)."""
    snapshot = snapshot_read(cursor)
    if snapshot is None:
        yield None
        return
    cache = VoteCache(directory)
    with cache.locked() as held:
        if not held:
            yield None
            return
        query = query_hash(sql, fields)
        state = cache.state(fields)
        old = state if cache.usable(cursor, state, snapshot, query, languages) else None
        yield Plan(cache, snapshot, query, tuple(languages), old)
