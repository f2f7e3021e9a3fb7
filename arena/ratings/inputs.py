"""What a full refit reads: the counted votes as it fits them, and the largest vote id, in one snapshot of
the database (so the live board, :mod:`arena.ratings.live`, adds exactly the votes the refit could not see)."""

from __future__ import annotations

from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Max

from arena.models import PairCountBase, Vote
from arena.votes import filters as vote_filters
from arena.votes import selectors


@contextmanager
def consistent_read():
    """One snapshot of the database for the enclosed reads: on PostgreSQL a REPEATABLE READ transaction
    (READ COMMITTED gives each statement its own), elsewhere a transaction (SQLite reads one snapshot).
    Inside an outer transaction (tests) the outer one's isolation applies."""
    outer = connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and not outer:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def base_exists() -> bool:
    return PairCountBase.objects.exists()


def vote_high_water() -> int:
    return int(Vote.objects.aggregate(m=Max("id"))["m"] or 0)


def refit_votes_read(percentile: float) -> tuple:
    """The counted votes as a refit fits them (:func:`arena.votes.filters.votes_filtered`) and the
    integrity summary, with ``vote_high_water``: the largest vote id when they were read, in the same
    snapshot of the database (so the live fit adds exactly the votes the refit could not see)."""
    with consistent_read():
        high_water = vote_high_water()
        votes, integrity = vote_filters.votes_filtered(
            selectors.votes_counted_columns(), percentile=percentile
        )
    return votes, {**integrity, "vote_high_water": high_water}
