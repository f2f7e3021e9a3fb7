"""The refit's vote columns kept on the worker's disk between refits (issue 16).

A refit at 10M votes spent 15-22 s having PostgreSQL pack every vote's columns again and numpy decode
them, though nearly all of them were the votes of the last refit: votes are inserted, and changed or
deleted only by rare admin actions. This keeps the decoded columns (what :mod:`arena.votes.columns` makes
of PostgreSQL's packed fields, in id order) in one file per column under ``ARENA_REFIT_CACHE_DIR``; a
refit asks the database only for the votes after the last one kept, appends them, and maps the files
copy-on-write (no copy, no fresh memory: the page cache's pages are the arrays).

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
- the same query (a hash of its SQL and of the columns' layout) and a language list that only grew
  (the files hold each vote's language as its index in the list as it was when the vote was kept: new
  languages are added at its end, and the reader maps the indices to the sorted list);
- the same boot of this machine (``/proc/sys/kernel/random/boot_id``): the files are never fsynced,
  since within one boot every reader sees what was written, and a crash that could lose written pages
  is a reboot;
- a state file and column files that agree (a write cut off half-way is never read).

Anything else, and the refit reads every vote as it would without the files, then writes a new
generation of them. Files are never truncated or rewritten in place (arrays mapped by an earlier
refit stay valid): a refit appends its new votes after the kept ones, and a new generation gets new
names, the old ones being unlinked. The newest minute of votes is written but not counted as kept
(:data:`YOUNG_S`): a vote still being committed may get a lower id than one committed just before the
refit's snapshot, and keeping the later one would make the next refit's count disagree and read
everything again. Only the refit's own read uses this: a reading transaction that has written nothing,
in one snapshot, with the default filter.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

VERSION = 2
YOUNG_S = 60  # votes younger than this (by created_at, against the snapshot's now()) are not kept
STATE = "state.json"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
# The key of this database and votes table, the change log, and the time (seconds since 1970) before
# which a vote is old enough to keep, as the refit's snapshot sees them.
KEY_SQL = """
SELECT current_database(), 'arena_vote'::regclass::oid::int8, k.token::text,
       (SELECT count(*) || ':' || coalesce(max(id), 0) FROM arena_vote_changes),
       extract(epoch FROM now())::float8 - %(young)s
FROM arena_vote_cache_key k LIMIT 1"""
COVERED_SQL = "SELECT count(*), coalesce(sum(v.id), 0) FROM arena_vote v WHERE v.counted AND v.id <= %(upto)s"


class CacheError(Exception):
    """The column files do not hold what their state says (changed or cut behind it)."""


@dataclass(frozen=True)
class CacheState:
    """What generation ``generation`` of the column files holds: ``count`` votes with ids up to ``upto``
    (their sum ``id_sum``), made by the query with hash ``query``, their languages as indices into
    ``languages``, read when the change log said ``counter``, during boot ``boot``."""

    version: int
    database: str
    table: int
    token: str
    query: str
    boot: str
    generation: str
    languages: tuple[str, ...]
    counter: str
    upto: int
    count: int
    id_sum: int


@dataclass(frozen=True)
class Snapshot:
    """The key and change log of the reading snapshot, and the vote time (seconds since 1970) from which
    a vote is too young to keep."""

    database: str
    table: int
    token: str
    counter: str
    young_after: float


def query_hash(sql: str, layout: list) -> str:
    return hashlib.sha256(json.dumps([sql, [[str(part) for part in column] for column in layout]]).encode()).hexdigest()[:16]  # fmt: skip


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def snapshot_read(cursor) -> Snapshot | None:
    """The reading transaction's key and change log, or None where the cache must not be used: outside a
    REPEATABLE READ snapshot, in a transaction that has written (its writes may yet roll back), or
    without the change log (a database not migrated on PostgreSQL)."""
    cursor.execute(
        "SELECT current_setting('transaction_isolation'), pg_current_xact_id_if_assigned() IS NULL,"
        " to_regclass('arena_vote_cache_key') IS NOT NULL"
    )
    isolation, clean, logged = cursor.fetchone()
    if isolation not in ("repeatable read", "serializable") or not clean or not logged:
        return None
    cursor.execute(KEY_SQL, {"young": YOUNG_S})
    row = cursor.fetchone()
    if row is None:
        return None
    return Snapshot(str(row[0]), int(row[1]), str(row[2]), str(row[3]), float(row[4]))


class VoteCache:
    """One folder of column files and their state; ``layout`` is ``[(name, dtype, inner shape)]`` of
    the columns. Hold :meth:`locked` around a read and its write."""

    def __init__(self, directory: Path | str, layout: list[tuple[str, str, tuple[int, ...]]]):
        self.directory = Path(directory)
        self.layout = layout

    def path(self, generation: str, name: str) -> Path:
        return self.directory / f"{generation}-{name}.bin"

    @staticmethod
    def row_bytes(dtype: str, inner: tuple[int, ...]) -> int:
        return np.dtype(dtype).itemsize * int(np.prod(inner, dtype=np.int64))

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

    def state(self) -> CacheState | None:
        """The stored state when it parses and every column file holds at least its votes."""
        try:
            raw = json.loads((self.directory / STATE).read_text())
            raw["languages"] = tuple(raw["languages"])
            state = CacheState(**raw)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if state.version != VERSION or state.count < 0 or not state.generation.isalnum():
            return None
        for name, dtype, inner in self.layout:
            path = self.path(state.generation, name)
            if not path.is_file() or path.stat().st_size < state.count * self.row_bytes(dtype, inner):
                return None
        return state

    def usable(self, cursor, state: CacheState | None, snapshot: Snapshot, query: str, languages) -> bool:
        """Whether ``state`` holds exactly the counted votes up to its last id in this snapshot."""
        if state is None or (state.database, state.table, state.token, state.counter, state.query) != (
            snapshot.database, snapshot.table, snapshot.token, snapshot.counter, query
        ):  # fmt: skip
            return False
        if state.boot != boot_id() or not set(state.languages) <= set(languages):
            return False
        cursor.execute(COVERED_SQL, {"upto": state.upto})
        count, id_sum = cursor.fetchone()
        return (int(count), int(id_sum)) == (state.count, state.id_sum)

    def append(self, state: CacheState, start: int, new: dict[str, np.ndarray]) -> None:
        """Write ``new``'s rows at row ``start`` of generation ``state.generation``'s files (no truncation:
        rows an earlier refit mapped beyond ``start`` are young rows written again with the same votes)."""
        for name, dtype, inner in self.layout:
            values = np.ascontiguousarray(new[name], dtype=dtype)
            path = self.path(state.generation, name)
            with open(path, "r+b" if path.exists() else "wb") as handle:
                handle.seek(start * self.row_bytes(dtype, inner))
                handle.write(memoryview(values).cast("B"))

    def state_write(self, state: CacheState) -> None:
        """Replace the state file (atomically), then unlink other generations' files."""
        temporary = self.directory / f"{STATE}.partial"
        temporary.write_text(json.dumps({**asdict(state), "languages": list(state.languages)}))
        os.replace(temporary, self.directory / STATE)
        for path in self.directory.glob("*-*.bin"):
            if not path.name.startswith(f"{state.generation}-"):
                path.unlink(missing_ok=True)  # arrays mapped from it stay valid until they are let go

    def forget(self) -> None:
        """Remove the state file (best effort), so that no later refit uses files a failed write left."""
        try:
            (self.directory / STATE).unlink(missing_ok=True)
        except OSError:
            pass

    def mapped(self, state: CacheState, rows: int) -> dict[str, np.ndarray]:
        """The first ``rows`` rows of each column, mapped copy-on-write (writes stay in this process)."""
        out = {}
        for name, dtype, inner in self.layout:
            if rows == 0:
                out[name] = np.empty((0, *inner), dtype=dtype)
                continue
            path = self.path(state.generation, name)
            if path.stat().st_size < rows * self.row_bytes(dtype, inner):
                raise CacheError(f"refit cache: {path.name} is shorter than its state says")
            out[name] = np.memmap(path, dtype=dtype, mode="c", shape=(rows, *inner)).view(np.ndarray)
        ids = out["id"][: state.count]
        if state.count and (int(ids.sum(dtype=np.int64)) != state.id_sum or int(ids[-1]) != state.upto):
            raise CacheError("refit cache: the kept ids do not match their state")
        return out


@dataclass
class Plan:
    """A refit's use of the cache, from the check to the write: ``old`` is the usable state (None: read
    every vote and write a new generation); ``languages`` the list the query codes languages by (the
    kept list, then languages new to it in sorted order)."""

    cache: VoteCache
    snapshot: Snapshot
    query: str
    languages: tuple[str, ...]
    old: CacheState | None

    @property
    def kept(self) -> int:
        return self.old.count if self.old is not None else 0

    def columns(self, new: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every vote's columns, the kept ones and then ``new`` (the votes after them, id order, decoded):
        ``new`` is appended to the files, the state now counts its votes up to the first young one, and
        the arrays returned are the files mapped copy-on-write."""
        young = np.flatnonzero(new["tstamp"] >= self.snapshot.young_after)
        keep = self.kept + (int(young[0]) if young.size else len(new["id"]))
        old = self.old
        base = old if old is not None else CacheState(
            version=VERSION, database=self.snapshot.database, table=self.snapshot.table,
            token=self.snapshot.token, query=self.query, boot=boot_id() or "",
            generation=secrets.token_hex(8), languages=(), counter="", upto=0, count=0, id_sum=0,
        )  # fmt: skip
        total = self.kept + len(new["id"])
        if len(new["id"]):
            self.cache.append(base, self.kept, new)
        ids = new["id"][: keep - self.kept]
        state = replace(
            base, languages=self.languages, counter=self.snapshot.counter, count=keep,
            upto=int(ids[-1]) if ids.size else base.upto, id_sum=base.id_sum + int(ids.sum(dtype=np.int64)),
        )  # fmt: skip
        if state != old:
            self.cache.state_write(state)
        return self.cache.mapped(state, total)


@contextmanager
def planned(cursor, directory, *, layout: list, sql: str, languages):
    """A :class:`Plan` for this snapshot while this process holds the folder, else None (no snapshot to
    trust, no boot id, or another refit holding the folder)."""
    snapshot = snapshot_read(cursor)
    if snapshot is None or boot_id() is None:
        yield None
        return
    cache = VoteCache(directory, layout)
    with cache.locked() as held:
        if not held:
            yield None
            return
        query = query_hash(sql, layout)
        state = cache.state()
        old = state if cache.usable(cursor, state, snapshot, query, languages) else None
        known = old.languages if old is not None else ()
        order = known + tuple(sorted(set(languages) - set(known)))
        yield Plan(cache, snapshot, query, order, old)
