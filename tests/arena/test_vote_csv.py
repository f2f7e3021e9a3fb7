"""``/api/votes.csv`` as PostgreSQL writes it (arena.votes.csv_writer): byte for byte what Python's formula-safe
CSV writer makes of :func:`arena.votes.selectors.votes_for_export`, every counted vote once, in order, across
chunk boundaries, with hostile model names and languages and votes that share a timestamp."""

from __future__ import annotations

import csv
import io
import threading
from datetime import timedelta

import pytest
from django.db import connection

from arena.models import Vote
from arena.votes import csv_writer as vote_csv
from arena.votes.exports import votes_csv_chunks
from arena.votes.selectors import EXPORT_COLUMNS, votes_for_export
from evalcore.boundary import csvsafe
from tests.arena.vote_data import T0, votes_create
from tests.conftest import database_backends, wait_backends_closed

pytestmark = pytest.mark.django_db

HOSTILE_NAMES = {"=cmd|' /C calc'!A0": 0.3, "-2.5": 0.0, 'a,"quoted"\nname': -0.2, "+inf": 0.1, "plain": 0.2}
LANGUAGES = ["en", "", "=1+1", "-2", "-x", 'a"b', "x,y", "@sum", "1e5", "+", "\tz", "ünï"]


def reference_csv() -> bytes:
    """The export as the Python writer made it before PostgreSQL wrote the lines."""
    buffer = io.StringIO()
    writer = csvsafe.writer(buffer, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for record in votes_for_export():
        record["tstamp"] = repr(record["tstamp"])
        record["anony"] = "true"
        writer.writerow([record[column] for column in EXPORT_COLUMNS])
    return buffer.getvalue().encode()


@pytest.fixture
def hostile_votes():
    votes_create(
        HOSTILE_NAMES, 40, seed=3, language=LANGUAGES, turn_count=[1, 2, 3], prompt_tokens=[0, 7, 123456]
    )
    votes_create(HOSTILE_NAMES, 5, seed=4, counted=False, start=T0 + timedelta(seconds=7))  # never exported
    # Five votes share one timestamp (a chunk may end among them), two others a sub-second one.
    same = list(Vote.objects.filter(counted=True).order_by("id")[10:15])
    Vote.objects.filter(pk__in=[v.pk for v in same]).update(created_at=T0 + timedelta(seconds=30))
    odd = list(Vote.objects.filter(counted=True).order_by("id")[20:22])
    Vote.objects.filter(pk__in=[v.pk for v in odd]).update(
        created_at=T0 + timedelta(seconds=3, microseconds=120)
    )


@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 50_000])
def test_sql_lines_equal_the_python_writer_across_chunks(hostile_votes, chunk_rows):
    header, _, body = reference_csv().partition(b"\n")
    assert b"".join(vote_csv.votes_csv_lines(chunk_rows)) == body
    assert header.decode().split(",") == list(EXPORT_COLUMNS)


def test_csv_is_complete_readable_and_formula_safe(client, hostile_votes):
    response = client.get("/api/votes.csv")
    assert response.status_code == 200 and response.streaming
    raw = b"".join(response.streaming_content)
    assert raw == reference_csv()
    rows = list(csv.DictReader(io.StringIO(raw.decode())))
    assert len(rows) == Vote.objects.filter(counted=True).count() == 40
    assert len({row["question_id"] for row in rows}) == 40
    stamps = [float(row["tstamp"]) for row in rows]
    assert stamps == sorted(stamps)
    names = {row["model_a"] for row in rows} | {row["model_b"] for row in rows}
    assert "'=cmd|' /C calc'!A0" in names and "-2.5" in names and "+inf" in names
    assert 'a,"quoted"\nname' in names
    assert {row["language"] for row in rows} >= {"'=1+1", "-2", "'-x", "x,y", 'a"b', "'@sum", "'+", "'\tz"}


def test_chunks_stay_bounded(hostile_votes):
    chunks = list(vote_csv.votes_csv_lines(4))
    assert [len(list(csv.reader(io.StringIO(chunk.decode())))) for chunk in chunks] == [4] * 10
    assert b"".join(votes_csv_chunks()) == reference_csv()


def test_no_votes_is_a_header_only(db):
    assert b"".join(votes_csv_chunks()) == (",".join(EXPORT_COLUMNS) + "\n").encode()


def test_votes_far_from_their_battles_are_looked_up(hostile_votes):
    """Votes in another order than their battles (old battles voted late): most of a chunk's battles
    lie outside the window around its median battle id and are read by key instead."""
    votes = list(Vote.objects.filter(counted=True).order_by("id"))
    order = sorted(range(len(votes)), key=lambda k: (k * 17) % len(votes))  # a fixed shuffle
    for when, k in enumerate(order):
        votes[k].created_at = T0 + timedelta(seconds=100 + when)
    Vote.objects.bulk_update(votes, ["created_at"])
    assert b"".join(vote_csv.votes_csv_lines(5)) == reference_csv().partition(b"\n")[2]


def _builders() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("votes-csv-")]


def _closed(before: int) -> None:
    """The builder threads are gone and their connections closed."""
    assert not _builders()
    wait_backends_closed(before, f"{before} connection(s) to the database")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 50_000])
def test_chunks_built_side_by_side_equal_the_python_writer(hostile_votes, chunk_rows):
    """Outside a transaction the chunks between keys found ahead are built on other connections; the
    bytes are the same as one connection's, for any chunk size and number of builders."""
    assert not connection.in_atomic_block
    body = reference_csv().partition(b"\n")[2]
    before = database_backends()
    for workers in (2, 3):
        chunks = list(vote_csv.votes_csv_lines(chunk_rows, workers=workers))
        assert b"".join(chunks) == body
        assert len(chunks) == -(-40 // chunk_rows)
    _closed(before)  # the builders closed their connections


@pytest.mark.django_db(transaction=True)
def test_a_download_closed_early_stops_its_builders(hostile_votes):
    before = database_backends()
    lines = vote_csv.votes_csv_lines(3, workers=2)
    first = next(lines)
    assert (
        list(csv.reader(io.StringIO(first.decode())))
        == list(csv.reader(io.StringIO(reference_csv().decode())))[1:4]
    )
    lines.close()
    _closed(before)
