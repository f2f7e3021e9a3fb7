"""Refit requests: a committed vote asks for a live point fit (debounced, within a second).

The full bootstrap refit no longer follows each vote: it runs on the beat schedule
(``CELERY_BEAT_SCHEDULE``), and the live fit asks for a debounced one while the arena is small
(``ARENA_REFIT_ON_VOTE_MAX_VOTES``, where a full refit costs about a second): see
:func:`arena.tasks.ratings_live` and docs/arena-ratings.md, "Live ratings".
"""

from __future__ import annotations

from arena.play.dispatch import ratings_live_schedule, ratings_refit_schedule


def refit_request() -> None:
    """Ask for a live ratings fit; call once the vote has committed. Never raises (see
    :func:`arena.play.dispatch.ratings_live_schedule`). One cache round trip per vote: a per-process
    throttle could leave a vote that commits just after a fit read the votes out of every fit."""
    ratings_live_schedule()


def exclusions_refit_request() -> None:
    """Ask for a debounced full refit (``ARENA_REFIT_DEBOUNCE_S``); call once a decision that changes
    which of the already-refitted votes count has committed (a voter's votes set aside, an identity vote
    restored): the live counts start from the last refit's, so only a full refit reflects it."""
    ratings_refit_schedule()
