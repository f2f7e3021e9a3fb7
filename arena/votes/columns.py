"""Counted votes as numpy columns from PostgreSQL, without a Python object per vote (the refit's input).

Reading 10M rows through a cursor, or through ``COPY`` (libpq hands over one row per message), costs a
Python round per row: minutes. Instead PostgreSQL packs each column of a range of ids into one ``bytea``
(``string_agg`` of ``int4send``/``int8send``/``float8send``: big-endian binary), a chunk of up to
:data:`CHUNK_IDS` ids per query, and numpy decodes each column with one ``frombuffer``. All the aggregates
of one query see the rows in the same order, so the columns line up; the votes are then put in vote-time
order (created_at, id). Small values travel several to a 64-bit field (:mod:`arena.votes.packing`: the
fields' SQL and how they are taken apart). Languages travel as their index in the sorted list of the
stored votes' languages (read first, from the language index); models as their ids, mapped to codes here.

The chunks come back in binary (no hex text for the bytea values) and, when the caller reads in a
snapshot that other connections can share (a REPEATABLE READ transaction that has written nothing, as
:func:`arena.ratings.inputs.consistent_read` opens), :data:`READERS` connections read chunks side by side in that
same snapshot (``pg_export_snapshot`` / ``SET TRANSACTION SNAPSHOT``): PostgreSQL packs the columns on
as many cores, and every reader sees exactly the rows the caller sees. Elsewhere (inside a test's
transaction, whose rows no other connection can see) one connection reads every chunk.
"""

from __future__ import annotations

import logging
import queue
import re
import threading

import numpy as np
import psycopg
from django.db import connections

from arena.models import STYLE_KEYS
from arena.votes import cache as vote_cache
from arena.votes.packing import (
    FIELDS,
    MAX_LANGUAGES,
    POSTGRES_EPOCH_MICROS,
    VOTER_FIELDS,
    joined,
    style_exact,
    style_unpacked,
    unpacked,
)

logger = logging.getLogger(__name__)
CHUNK_IDS = 500_000
READERS = 2  # connections reading chunks side by side (see the module docstring)
WANTED_SQL = "(v.counted OR v.excluded_reason = ANY(%(also)s::text[]))"
# Every distinct language of the stored votes (counted or not) by a loose scan of the language index: one
# index probe per language where SELECT DISTINCT over the votes read the whole table (3.7 s at 10M votes).
# A language without wanted votes only gets no mask (selectors.language_masks).
LANGUAGES_SQL = """
WITH RECURSIVE seen(language) AS (
    (SELECT language FROM arena_vote ORDER BY language LIMIT 1)
    UNION ALL
    SELECT (SELECT v.language FROM arena_vote v WHERE v.language > seen.language ORDER BY v.language LIMIT 1)
    FROM seen WHERE seen.language IS NOT NULL
)
SELECT language FROM seen WHERE language IS NOT NULL"""


def _chunk_sql(fields: list) -> str:
    packed = ", ".join(f"string_agg({send}({sql}), ''::bytea)" for _, sql, send, _ in fields)
    return (
        f"SELECT count(*), {packed} FROM arena_vote v WHERE {WANTED_SQL} AND v.id >= %(lo)s AND v.id < %(hi)s"
    )


def _chunk(cursor, fields: list, params: dict) -> dict[str, np.ndarray] | None:
    cursor.execute(_chunk_sql(fields), params, binary=True)
    row = cursor.fetchone()
    count = int(row[0])
    if not count:
        return None
    columns = {}
    for (name, _, _, kind), packed in zip(fields, row[1:]):
        values = np.frombuffer(bytes(packed), dtype=kind)
        if values.shape[0] != count:
            raise ValueError(f"column {name}: {values.shape[0]} values for {count} votes")
        columns[name] = values
    ids = columns["id"]
    if not bool(np.all(ids[1:] > ids[:-1])):  # the plan's row order: in id order (the cache keeps a prefix)
        order = np.argsort(ids, kind="stable")
        columns = {name: values[order] for name, values in columns.items()}
    return columns


def _put_in_vote_order(rows: dict[str, np.ndarray]) -> None:
    """Sort the columns in place by (created_at, id), the ORM path's order, by their "tstamp" (seconds
    since 1970 as float64: distinct microseconds stay distinct and in order until the year 2242, where
    float64's spacing reaches a microsecond). Votes come nearly in that order (stored as they were
    cast, a few late commits apart): only the votes out of place are moved."""
    times, ids = rows["tstamp"], rows["id"]
    if _in_vote_order(times, ids):
        return
    # Rows in id order: a stable sort on the time keeps the ids in order among equal times (and on
    # nearly sorted keys numpy's stable sort is a fast merge of runs).
    order = np.argsort(times, kind="stable") if bool(np.all(np.diff(ids) > 0)) else np.lexsort((ids, times))
    moved = np.flatnonzero(order != np.arange(order.size))
    source = order[moved]
    for values in rows.values():
        values[moved] = values[source]  # the right side is gathered first: safe in place


def _in_vote_order(times: np.ndarray, ids: np.ndarray, block: int = 1 << 18) -> bool:
    """Whether the votes already stand in (created_at, id) order, as they do when votes were stored in
    the order they were cast (the sort and its gathers then cost nothing). A block at a time: no 10M-vote
    temporaries (fresh pages cost more than the comparisons)."""
    for start in range(0, max(len(times) - 1, 0), block):
        stop = min(len(times), start + block + 1)
        step = np.diff(times[start:stop])
        if not bool(np.all((step > 0) | ((step == 0) & (np.diff(ids[start:stop]) > 0)))):
            return False
    return True


def _codes(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense codes (0, 1, ...) of 64-bit hashes, and the distinct hashes in code order."""
    distinct, inverse = np.unique(hashes, return_inverse=True)
    return inverse.astype(np.int64), distinct


def _voters(cursor, rows: dict, params: dict) -> dict:
    """Session and IP codes, with the stored hash of each code."""
    out = {}
    for name, column in (("session", "session_hash"), ("ip", "ip_hash")):
        codes, distinct = _codes(rows[name])
        cursor.execute(
            f"SELECT DISTINCT hashtextextended(v.{column}, 0), v.{column} FROM arena_vote v WHERE {WANTED_SQL}",
            params,
        )
        by_hash = dict(cursor.fetchall())
        out[f"{name}_code"] = codes
        out[f"{name}_hashes"] = tuple(by_hash[int(h)] for h in distinct)
    return out


def _shared_snapshot(connection) -> str | None:
    """An exported snapshot of this connection's transaction when other connections may read in it:
    REPEATABLE READ (or stricter) and nothing written by it (its writes would be invisible to them)."""
    if not connection.in_atomic_block:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('transaction_isolation'), pg_current_xact_id_if_assigned() IS NULL"
        )
        isolation, clean = cursor.fetchone()
        if isolation not in ("repeatable read", "serializable") or not clean:
            return None
        cursor.execute("SELECT pg_export_snapshot()")
        return cursor.fetchone()[0]


def _reader(
    alias: str, snapshot: str, todo: queue.Queue, fields: list, params: dict, parts: dict, errors: list
):
    """A helper thread: its own connection, in the caller's snapshot, reads chunks until none is left."""
    own = connections.create_connection(alias)
    try:
        if not re.fullmatch(r"[0-9A-F]+-[0-9A-F]+(-[0-9A-F]+)?", snapshot):
            raise ValueError(f"unexpected snapshot id {snapshot!r}")
        own.ensure_connection()
        with psycopg.Cursor(own.connection) as cursor:  # server-side binding: binary results
            cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            _drain(cursor, todo, fields, params, parts)
            cursor.execute("COMMIT")
    except BaseException as exc:  # re-raised by the caller
        errors.append(exc)
    finally:
        own.close()


def _drain(cursor, todo: queue.Queue, fields: list, params: dict, parts: dict) -> None:
    """Read chunks (their first ids from ``todo``) into ``parts`` until none is left."""
    while True:
        try:
            lo = todo.get_nowait()
        except queue.Empty:
            return
        parts[lo] = _chunk(cursor, fields, {**params, "lo": lo, "hi": lo + CHUNK_IDS})


def _chunks(connection, fields: list, params: dict, low: int, high: int) -> list[dict[str, np.ndarray]]:
    """Every chunk of ids from ``low`` to ``high``, in id order, read by this connection and, in a
    shared snapshot, by :data:`READERS` - 1 more."""
    todo: queue.Queue = queue.Queue()
    for lo in range(low, high + 1, CHUNK_IDS):
        todo.put(lo)
    parts: dict[int, dict | None] = {}
    errors: list[BaseException] = []
    snapshot = _shared_snapshot(connection) if todo.qsize() > 1 and READERS > 1 else None
    helpers = [
        threading.Thread(target=_reader, args=(connection.alias, snapshot, todo, fields, params, parts, errors),
                         name=f"vote-columns-{k}", daemon=True)
        for k in range(READERS - 1 if snapshot else 0)
    ]  # fmt: skip
    for helper in helpers:
        helper.start()
    try:
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            _drain(cursor, todo, fields, params, parts)
    finally:
        for helper in helpers:
            helper.join()
    if errors:
        raise errors[0]
    return [parts[lo] for lo in sorted(parts) if parts[lo] is not None]


# The decoded columns as the refit cache keeps them (arena.votes.cache): name, file dtype, inner shape.
LAYOUT = [
    ("id", "<i8", ()), ("a", "<i4", ()), ("b", "<i4", ()), ("outcome", "i1", ()), ("has_prompt", "i1", ()),
    ("language", "<i4", ()), ("turn_count", "<i8", ()), ("prompt_tokens", "<i8", ()), ("tstamp", "<f8", ()),
    ("style_a", "<f8", (len(STYLE_KEYS),)), ("style_b", "<f8", (len(STYLE_KEYS),)), ("prompt", "<i8", ()),
]  # fmt: skip


def _decoded(connection, cursor, fields: list, params: dict, low, high) -> dict[str, np.ndarray]:
    """The wanted votes with ids from ``low`` to ``high`` (None: none), decoded, in id order: model ids
    "a" and "b", the values of :data:`~arena.votes.packing.PACKED`, "tstamp" (seconds since 1970), the
    style counts (exact), the prompt hash and, with :data:`~arena.votes.packing.VOTER_FIELDS`, the voters'
    hashes."""
    parts = _chunks(connection, fields, params, int(low), int(high)) if low is not None and low <= high else []
    rows = joined(parts, fields)
    unpacked(rows)
    odd = style_unpacked(rows)
    if odd.size:
        style_exact(cursor, rows, odd)
    micros = rows.pop("micros")
    micros += POSTGRES_EPOCH_MICROS
    rows["tstamp"] = np.divide(micros, 1e6)
    return rows


def _cached(connection, cursor, fields: list, params: dict, cache_dir, low, high, found: list):
    """Every wanted vote's decoded columns through the refit cache (:mod:`arena.votes.cache`): the kept
    ones mapped from its files, the newer ones read and appended; None when the cache may not be used
    here. Sets ``params["languages"]`` to the list the language indices refer to."""
    layout_sql = _chunk_sql(fields)
    with vote_cache.planned(cursor, cache_dir, layout=LAYOUT, sql=layout_sql, languages=found) as plan:
        if plan is None:
            return None
        params["languages"] = list(plan.languages)
        start = plan.old.upto + 1 if plan.kept else low
        try:
            try:
                return plan.columns(_decoded(connection, cursor, fields, params, start, high))
            except vote_cache.CacheError:  # the files changed behind their state: read all, write anew
                plan.old, plan.languages = None, tuple(found)
                params["languages"] = list(found)
                return plan.columns(_decoded(connection, cursor, fields, params, low, high))
        except OSError as exc:  # a full disk, a folder gone: the refit goes on without the cache
            logger.warning("refit cache at %s not usable (%s): reading every vote", cache_dir, exc)
            plan.cache.forget()
            return None


def read_postgresql(
    connection, code_of: dict[int, int], *, also_excluded=(), voters: bool = False, cache_dir=None
) -> dict:
    """The votes' columns, as :func:`arena.votes.selectors.votes_counted_columns` wants them. ``cache_dir``: keep
    the decoded columns there between refits and read only newer votes (:mod:`arena.votes.cache`); used for
    the default read only (no ``also_excluded``, no ``voters``)."""
    fields = FIELDS + (VOTER_FIELDS if voters else [])
    params: dict = {"also": list(also_excluded)}
    with connection.cursor() as cursor:
        cursor.execute(LANGUAGES_SQL)
        found = [row[0] for row in cursor.fetchall()] or [""]
        if len(found) > MAX_LANGUAGES:
            raise ValueError(f"{len(found)} distinct vote languages: the refit reads at most {MAX_LANGUAGES}")
        cursor.execute(f"SELECT min(id), max(id) FROM arena_vote v WHERE {WANTED_SQL}", params)
        low, high = cursor.fetchone()
        rows = None
        if cache_dir and not also_excluded and not voters:
            rows = _cached(connection, cursor, fields, params, cache_dir, low, high, found)
        if rows is None:
            params["languages"] = found
            rows = _decoded(connection, cursor, fields, params, low, high)
        _put_in_vote_order(rows)  # on mapped files, only the pages of the votes moved are copied
        extra = _voters(cursor, rows, params) if voters else {}
    language_code = rows["language"]
    if params["languages"] != found:  # the cache's order of languages: to the sorted list's
        position = {lang: k for k, lang in enumerate(found)}
        language_code = np.array([position[lang] for lang in params["languages"]], dtype=np.int32)[language_code]
    ids = np.fromiter(code_of.keys(), dtype=np.int64, count=len(code_of))
    lookup = np.full(int(ids.max()) + 1 if ids.size else 1, -1, dtype=np.int32)
    lookup[ids] = np.fromiter(code_of.values(), dtype=np.int32, count=len(code_of))
    prompt_code, _ = _codes(rows["prompt"])
    prompt_code[rows["has_prompt"] == 0] = -1
    return {
        "a": lookup[rows["a"]],
        "b": lookup[rows["b"]],
        "outcome": rows["outcome"],
        "tstamp": rows["tstamp"],
        "turn_count": rows["turn_count"],
        "prompt_tokens": rows["prompt_tokens"],
        "language": None,  # the codes below say it (an object array of 10M strings costs seconds)
        "language_code": language_code,
        "languages": tuple(found),
        "style_a": rows["style_a"],
        "style_b": rows["style_b"],
        "prompt_code": prompt_code,
        "vote_id": rows["id"],
        **extra,
    }
