"""The refit's fast PostgreSQL read (packed binary columns) gives exactly what the ORM path gives."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.db import connection, transaction

from arena.models import Vote
from arena.votes import columns as vote_columns
from arena.votes import selectors
from tests.arena.vote_data import T0, votes_create
from tests.conftest import database_backends, wait_backends_closed


@pytest.fixture
def odd_votes(db):
    votes = votes_create({"alpha": 0.5, "beta": 0.0, "gamma": -0.5}, 60, seed=2, language=["en", "de", ""],
                         turn_count=[1, 2, 3], prompt_tokens=[5, 600, 40], verbose={"alpha": 0.3})  # fmt: skip
    # Style written by older code or by hand: another key name, a string, nothing at all, a null.
    odd = [{"tokens": 10, "lists": 3, "bold": 1}, {"tokens": "12", "headers": 2}, {}, {"tokens": None}]
    for vote, style in zip(votes[:4], odd):
        Vote.objects.filter(pk=vote.pk).update(style_a=style, style_b=style)
    # Two votes at the same instant (order by id) and one that is not counted.
    Vote.objects.filter(pk__in=[votes[10].pk, votes[11].pk]).update(created_at=T0 + timedelta(seconds=30.5))
    Vote.objects.filter(pk=votes[12].pk).update(counted=False)
    return votes


def test_packed_read_equals_the_orm_read(odd_votes, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.fail("this compares the PostgreSQL path: run the suite with `make test`")
    monkeypatch.setattr(vote_columns, "CHUNK_IDS", 7)  # many chunks, some of them empty
    _, code_of = selectors._names_table()
    fast = vote_columns.read_postgresql(connection, code_of, voters=True)
    slow = selectors._read_orm(code_of, voters=True)
    assert len(fast["a"]) == len(odd_votes) - 1
    for name in ("a", "b", "outcome", "turn_count", "prompt_tokens", "style_a", "style_b"):
        np.testing.assert_array_equal(fast[name], slow[name], err_msg=name)
    assert fast["language"] is None  # said by the codes
    assert [fast["languages"][k] for k in fast["language_code"]] == list(slow["language"])
    # Codes may be numbered differently; they must split the votes the same way, and name the same voters.
    for name in ("prompt_code", "session_code", "ip_code"):
        pairs = set(zip(fast[name].tolist(), slow[name].tolist()))
        assert len(pairs) == len(set(fast[name].tolist())) == len(set(slow[name].tolist())), name
    assert [fast["session_hashes"][k] for k in fast["session_code"]] == [
        slow["session_hashes"][k] for k in slow["session_code"]
    ]
    np.testing.assert_allclose(fast["tstamp"], slow["tstamp"], rtol=0, atol=1e-4)
    assert fast["style_a"][0].tolist() == [10.0, 0.0, 3.0, 1.0]
    assert fast["style_a"][1].tolist() == [0.0, 2.0, 0.0, 0.0]


def test_columns_of_no_votes(db):
    columns = selectors.votes_counted_columns()
    assert len(columns) == 0 and columns.first_vote_at is None and columns.style_a.shape == (0, 4)


def _read_in(isolation: str | None, code_of: dict) -> dict:
    """read_postgresql in its own transaction (``isolation``), or outside any."""
    if isolation is None:
        return vote_columns.read_postgresql(connection, code_of, voters=True)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation} READ ONLY")
        return vote_columns.read_postgresql(connection, code_of, voters=True)


@pytest.mark.django_db(transaction=True)
def test_readers_side_by_side_in_one_snapshot_equal_one_reader(odd_votes, monkeypatch):
    """In a REPEATABLE READ transaction that wrote nothing, a second connection reads chunks in the
    same snapshot: the columns are those of one connection, and a vote committed by someone else
    during the read is in neither."""
    monkeypatch.setattr(vote_columns, "CHUNK_IDS", 5)
    _, code_of = selectors._names_table()
    one = _read_in("READ COMMITTED", code_of)  # no shared snapshot: one connection
    began = []

    def spy(*args):  # the helper starts: commit a vote from another connection now
        began.append(True)
        Vote.objects.filter(pk=odd_votes[12].pk).update(counted=True)
        connection.close()  # the connection this thread opened for that update
        return real(*args)

    real = vote_columns._reader
    monkeypatch.setattr(vote_columns, "_reader", spy)
    before = database_backends()
    two = _read_in("REPEATABLE READ", code_of)
    assert began, "no second reader started"
    for name in (
        "a",
        "b",
        "outcome",
        "turn_count",
        "prompt_tokens",
        "style_a",
        "style_b",
        "tstamp",
        "language_code",
    ):
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)
    assert len(two["a"]) == len(odd_votes) - 1  # the vote counted during the read is not in this snapshot
    wait_backends_closed(before, "the second reader's connection closed")
    assert len(_read_in("REPEATABLE READ", code_of)["a"]) == len(odd_votes)


@pytest.mark.parametrize("ids_sorted", [True, False])
def test_columns_are_put_in_vote_order_like_a_full_sort(ids_sorted):
    """Nearly sorted times (a few late commits), equal times, ids in or out of order: the columns end
    in (created_at, id) order, as a lexsort of everything puts them."""
    rng = np.random.default_rng(7)
    n = 5000
    micros = np.sort(rng.integers(0, 2000, n))  # many equal times
    swap = rng.choice(n - 1, 40, replace=False)
    micros[swap], micros[swap + 1] = micros[swap + 1].copy(), micros[swap].copy()
    ids = np.arange(n, dtype=np.int64) * 3 + 5
    if not ids_sorted:
        ids = rng.permutation(ids)
    rows = {"tstamp": micros.copy(), "id": ids.copy(), "x": np.arange(n, dtype=np.float64)}
    order = np.lexsort((ids, micros))
    vote_columns._put_in_vote_order(rows)
    np.testing.assert_array_equal(rows["id"], ids[order])
    np.testing.assert_array_equal(rows["tstamp"], micros[order])
    np.testing.assert_array_equal(rows["x"], np.arange(n)[order])


def test_languages_come_from_the_index_and_only_voted_ones_get_a_mask(odd_votes):
    """The language list is every stored vote's language (a loose scan of the language index), a superset
    of the counted votes' languages: one found only on an uncounted vote gets no mask, so no category."""
    Vote.objects.filter(pk=odd_votes[12].pk).update(language="xx")  # the uncounted vote
    columns = selectors.votes_counted_columns()
    assert "xx" in columns.languages
    assert sorted(columns.languages) == sorted(set(Vote.objects.values_list("language", flat=True)))
    masks = columns.language_masks()
    assert "xx" not in masks
    counted = Vote.objects.filter(counted=True)
    assert {lang: int(mask.sum()) for lang, mask in masks.items()} == {
        lang: counted.filter(language=lang).count() for lang in set(counted.values_list("language", flat=True)) if lang
    }


def test_packed_values_survive_their_limits(odd_votes):
    """Values at the edges of their bits in "pair" and "packed" come back as the ORM reads them."""
    edge = odd_votes[5]
    Vote.objects.filter(pk=edge.pk).update(
        turn_count=32767, prompt_tokens=2**31 - 1, winner="tie (bothbad)", language="zz-last"
    )
    Vote.objects.filter(pk=odd_votes[6].pk).update(turn_count=0, prompt_tokens=0, winner="model_b", prompt_hash="")
    _, code_of = selectors._names_table()
    fast = vote_columns.read_postgresql(connection, code_of)
    slow = selectors._read_orm(code_of)
    for name in ("a", "b", "outcome", "turn_count", "prompt_tokens"):
        np.testing.assert_array_equal(fast[name], slow[name], err_msg=name)
    assert [fast["languages"][k] for k in fast["language_code"]] == list(slow["language"])
    assert (fast["prompt_code"] == -1).tolist() == (slow["prompt_code"] == -1).tolist()
    assert 32767 in fast["turn_count"].tolist() and 2**31 - 1 in fast["prompt_tokens"].tolist()


def test_style_counts_that_are_not_small_integers_are_read_exactly(odd_votes):
    """Fractions, huge counts and counts past the packed fields' bits come back exactly (read afterwards
    for those votes alone); the rest from the packed fields."""
    odd = [{"tokens": 2.5, "headers": 1}, {"tokens": 1e12, "bold": 1023}, {"tokens": 4294967294, "lists": 1022},
           {"tokens": 3e9, "headers": 5000}]  # fmt: skip
    for vote, style in zip(odd_votes[:4], odd):
        Vote.objects.filter(pk=vote.pk).update(style_a=style, style_b={**style, "tokens": 7})
    _, code_of = selectors._names_table()
    fast = vote_columns.read_postgresql(connection, code_of)
    slow = selectors._read_orm(code_of)
    for name in ("style_a", "style_b"):
        np.testing.assert_array_equal(fast[name], slow[name], err_msg=name)
    assert 2.5 in fast["style_a"][:, 0].tolist() and 1e12 in fast["style_a"][:, 0].tolist()
