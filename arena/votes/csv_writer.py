"""``/api/votes.csv`` written by PostgreSQL: one query per :data:`CHUNK_ROWS` votes, one string each.

A Python round per vote (a cursor row, a dict, ``csv.writer``) caps the export near 100,000 rows/s; at
10M votes that is minutes. Here PostgreSQL builds each CSV line and ``string_agg`` joins a chunk of
lines into one text value, so Python handles one string per chunk. Chunks follow the export's order
(``created_at, id``) by keyset, ``(created_at, id) > (last seen)``: no long transaction, no cursor
held between chunks, and memory bounded by one chunk whatever the table size.

The lines are byte for byte what ``evalcore.boundary.csvsafe.writer`` writes from
:func:`arena.votes.selectors.votes_for_export` (the test compares them): model names, the only free text
besides the language, are escaped in Python (:func:`evalcore.boundary.csvsafe.safe_cell` and ``csv`` quoting)
and joined in by id; the language cell is escaped in SQL the same way (a formula-like cell that does
not parse as a number gets a leading apostrophe; a cell with a comma, quote or line break is quoted);
``tstamp`` is the shortest decimal of the vote's epoch seconds, as Python's ``repr`` of the float.

One PostgreSQL backend writes about 200,000 lines a second, and the next chunk's start depends on the
last chunk's end. So, outside a transaction, the export first finds each chunk's last key with a cheap
keyset step over the index (``OFFSET chunk_rows - 1``: no line is built), and :data:`CSV_WORKERS`
threads, each with its own connection (its own backend), build the chunks between consecutive keys
side by side; the chunks are yielded in order, at most ``CSV_WORKERS + 1`` of them in memory. Inside a
transaction (a test's, or a caller's atomic block) other connections would not see its rows, so the
chunks are built one after the other on the caller's connection.
"""

from __future__ import annotations

import csv
import io
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future

from django.db import connection, transaction

from arena.models import Battle, LanguageModel, Vote
from arena.models.catalogue import stand_in
from evalcore.boundary import csvsafe

CHUNK_ROWS = 50_000
CSV_WORKERS = 2  # connections building chunks side by side (see the module docstring)
_NUMBER = r"^\s*[+-]?((\d(_?\d)*)?\.?\d(_?\d)*([eE][+-]?\d(_?\d)*)?|inf|infinity|nan)\s*$"
_LANGUAGE = (
    "(SELECT CASE WHEN q ~ '[\",\\r\\n]' THEN '\"' || replace(q, '\"', '\"\"') || '\"' ELSE q END"
    " FROM (SELECT CASE WHEN l ~ '^[=+@\\t\\r-]' AND l !~* %(number)s THEN '''' || l ELSE l END AS q"
    " FROM (SELECT coalesce(v.language, '') AS l) AS raw) AS safe)"
)
_TSTAMP = (
    "(SELECT CASE WHEN e = trunc(e) THEN trunc(e)::text || '.0' ELSE rtrim(e::text, '0') END"
    " FROM (SELECT extract(epoch FROM v.created_at) AS e) AS epoch)"
)
_STYLE = ", ".join(
    f"trunc(v.style_{side}_{key})::int8::text"
    for key in ("tokens", "headers", "list_items", "bold")
    for side in ("a", "b")
)


def _chunk_sql() -> str:
    """The next chunk's votes (by the ``created_at`` index, materialized), then their lines.

    Battles are read as one index range around the chunk's median battle id (battles are created just
    before their vote, so a chunk's battles sit close together) and hash-joined; a vote whose battle lies
    outside that window (voted long after it started) looks its battle up by key. Either way a chunk costs
    work in proportion to its size, never to the table's. Names are hash-joined on the chunk only.
    """
    line = (
        f"concat_ws(',', replace(coalesce(nb.public_id, (SELECT o.public_id FROM {Battle._meta.db_table} o"
        f" WHERE o.id = v.battle_id))::text, '-', ''), ma.cell, mb.cell, v.winner, {_TSTAMP},"
        f" v.turn_count::text, {_LANGUAGE}, 'true', v.prompt_tokens::text, {_STYLE}) || E'\\n'"
    )
    return (
        f"WITH v AS MATERIALIZED (SELECT * FROM {Vote._meta.db_table} v"
        " WHERE v.counted AND (v.created_at, v.id) > (%(after_at)s, %(after_id)s)"
        " AND (v.created_at, v.id) <= (%(upto_at)s, %(upto_id)s)"
        " ORDER BY v.created_at, v.id LIMIT %(cap)s),"
        " mid AS (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY battle_id) AS m FROM v),"
        f" near AS MATERIALIZED (SELECT b.id, b.public_id FROM {Battle._meta.db_table} b"
        " WHERE b.id BETWEEN (SELECT m FROM mid) - %(limit)s AND (SELECT m FROM mid) + %(limit)s),"
        " names(id, cell) AS MATERIALIZED (SELECT * FROM unnest(%(ids)s::int8[], %(cells)s::text[]))"
        f" SELECT count(*), string_agg({line}, '' ORDER BY v.created_at, v.id),"
        " max(v.created_at), (array_agg(v.id ORDER BY v.created_at DESC, v.id DESC))[1]"
        " FROM v LEFT JOIN near nb ON nb.id = v.battle_id"
        " JOIN names ma ON ma.id = v.model_a_id JOIN names mb ON mb.id = v.model_b_id"
    )


def name_cells() -> tuple[list[int], list[str]]:
    """Every model's id and its name as a CSV cell (formula-safe, quoted where needed); a withheld name
    is its stand-in (arena.models.catalogue.stand_in)."""
    ids, cells = [], []
    for pk, name, withheld in LanguageModel.objects.values_list("id", "name", "name_withheld"):
        name = stand_in(pk) if withheld else name
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="").writerow([csvsafe.safe_cell(name), ""])
        ids.append(pk)
        cells.append(buffer.getvalue()[:-1])  # the cell as it stands in a row (the empty cell dropped)
    return ids, cells


_NEXT_KEY_SQL = (
    f"SELECT v.created_at, v.id FROM {Vote._meta.db_table} v"
    " WHERE v.counted AND (v.created_at, v.id) > (%(after_at)s, %(after_id)s)"
    " ORDER BY v.created_at, v.id OFFSET %(skip)s LIMIT 1"
)
# No upper key: the chunk ends at its LIMIT (``cap``). A chunk between two keys has no LIMIT (a vote
# committed late inside its range is still exported); ``limit`` also sizes the window of battle ids.
_END = {"upto_at": "infinity", "upto_id": 2**63 - 1}


def _chunk(params: dict) -> tuple[int, str, object, int]:
    """One chunk on this thread's connection: (count, lines, last created_at, last id)."""
    with transaction.atomic(), connection.cursor() as cursor:
        # Compiling the line expression (JIT) costs more than it saves; the CTEs' row estimates are
        # guesses that pick merge joins (sorting the chunk three times) where hash joins are cheaper.
        cursor.execute("SELECT set_config('jit', 'off', true), set_config('enable_mergejoin', 'off', true)")
        cursor.execute(_chunk_sql(), params)
        return cursor.fetchone()


def _one_by_one(params: dict, chunk_rows: int) -> Iterator[bytes]:
    """Chunks in order on this connection, each starting after the last one's end."""
    params = {**params, **_END, "cap": chunk_rows}
    while True:
        count, text, last_at, last_id = _chunk(params)
        if not count:
            return
        yield text.encode()
        if count < chunk_rows:
            return
        params["after_at"], params["after_id"] = last_at, last_id


def _builder(jobs: queue.Queue) -> None:
    """A worker thread: build the chunks it is handed on its own connection; close it when done."""
    try:
        while (job := jobs.get()) is not None:
            future, params = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(_chunk(params))
                except BaseException as exc:  # handed to the reader, which raises it in the response
                    future.set_exception(exc)
    finally:
        connection.close()


def _side_by_side(params: dict, chunk_rows: int, workers: int) -> Iterator[bytes]:
    """Chunks between keys found ahead on this connection, built by ``workers`` threads, in order."""
    jobs: queue.Queue = queue.Queue()
    threads = [threading.Thread(target=_builder, args=(jobs,), name=f"votes-csv-{k}", daemon=True)
               for k in range(workers)]  # fmt: skip
    for thread in threads:
        thread.start()
    pending: deque[tuple[Future, bool]] = deque()
    after = {"after_at": params["after_at"], "after_id": params["after_id"]}
    try:
        more = True
        while more or pending:
            while more and len(pending) <= workers:
                with connection.cursor() as cursor:
                    cursor.execute(_NEXT_KEY_SQL, {**after, "skip": chunk_rows - 1})
                    key = cursor.fetchone()
                upto = (
                    {"upto_at": key[0], "upto_id": key[1], "cap": None}
                    if key
                    else {**_END, "cap": chunk_rows}
                )
                future: Future = Future()
                jobs.put((future, {**params, **after, **upto}))
                pending.append((future, key is None))
                more = key is not None
                if key:
                    after = {"after_at": key[0], "after_id": key[1]}
            future, last = pending.popleft()
            count, text, last_at, last_id = future.result()
            if count:
                yield text.encode()
            if last and count >= chunk_rows:  # votes arrived after the last key was found: go on from here
                yield from _one_by_one({**params, "after_at": last_at, "after_id": last_id}, chunk_rows)
    finally:
        for future, _ in pending:
            future.cancel()
        for _ in threads:
            jobs.put(None)
        for thread in threads:
            thread.join(timeout=60)


def votes_csv_lines(chunk_rows: int = CHUNK_ROWS, workers: int | None = None) -> Iterator[bytes]:
    """The CSV body (no header), counted votes oldest first, in chunks of ``chunk_rows`` lines, built by
    ``workers`` connections side by side (default :data:`CSV_WORKERS`; one inside a transaction)."""
    ids, cells = name_cells()
    params = {"ids": ids, "cells": cells, "number": _NUMBER, "limit": chunk_rows,
              "after_at": "-infinity", "after_id": 0}  # fmt: skip
    workers = CSV_WORKERS if workers is None else workers
    if workers < 2 or connection.in_atomic_block:
        yield from _one_by_one(params, chunk_rows)
    else:
        yield from _side_by_side(params, chunk_rows, workers)
