"""The arena's one way to start work on a worker: tasks are enqueued by name, never imported.

Services call these functions instead of importing ``arena.tasks`` (which imports the services), so
the two never depend on each other. Every send goes out after the transaction that made the work
commits: generation registers itself with ``transaction.on_commit``; a refit is asked for from a
commit callback already (see :mod:`arena.ratings.requests`). The names are those ``arena.tasks``
registers; a test checks each one is a registered task declaring the queue used here.

A process that imported the task (a worker, a test) runs it through the task object, so eager mode
and the task's own options apply; elsewhere (the web server) the name goes to the broker as is.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery import signature
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from workers.celery import app
from workers.queues import DEFAULT, JUDGE, generation_queue

if TYPE_CHECKING:
    from arena.models import Turn

log = logging.getLogger(__name__)

BATTLE_GENERATE = "arena.tasks.battle_generate"
RATINGS_REFIT = "arena.tasks.ratings_refit"
RATINGS_LIVE = "arena.tasks.ratings_live"
RELEASE_BUILD = "arena.tasks.release_build"
CATEGORIES_TAG = "arena.tasks.categories_tag"
SIDES = ("a", "b")


def send(name: str, *, queue: str, args: list | None = None, countdown: float | None = None):
    """Enqueue task ``name`` on ``queue`` now; the queue is explicit because a process that never
    imported the task (the web server) cannot read the queue it declares."""
    return signature(name, args=args or [], app=app).apply_async(queue=queue, countdown=countdown)


def generation_enqueue(turn: Turn, *, on_failure: Callable[[Exception], None]) -> None:
    """Once the transaction commits: both sides' answers to ``turn``, each on the queue of the
    workers that serve its model (one commit callback for the pair). When the broker cannot take
    them, ``on_failure(exc)`` is called instead of raising from the commit hook."""

    def send_both() -> None:
        battle = turn.battle
        try:
            for side, model in zip(SIDES, (battle.model_a, battle.model_b), strict=True):
                send(BATTLE_GENERATE, args=[turn.pk, side], queue=generation_queue(model.queue_suffix))
        except Exception as exc:  # the broker is down: the caller fails the turn with a clear message
            log.exception("could not queue the answers to turn %s", turn.pk)
            on_failure(exc)

    transaction.on_commit(send_both)


# Coalescing: the first call adds a cache key and enqueues ratings_refit with a countdown of
# ARENA_REFIT_DEBOUNCE_S; the key stays until that refit starts (it deletes the key before it reads the
# votes), so however long the refit waits in its queue, later calls find the key and do nothing: at most
# one refit is ever waiting, and every vote a call stands for committed before the waiting refit reads
# the votes. A vote after the refit started schedules the next one. The key expires after
# REFIT_PENDING_TIMEOUT_S in case its task was lost; the beat schedule (CELERY_BEAT_SCHEDULE in settings)
# refits periodically as well, and a refit with no changed votes writes nothing.
REFIT_PENDING_KEY = "arena:ratings_refit:pending"
REFIT_PENDING_TIMEOUT_S = 15 * 60


def ratings_refit_schedule() -> bool:
    """Enqueue a ratings refit unless one is already waiting; call after the votes it stands for
    committed. True when enqueued.

    Never raises: the vote is already committed, and a cache or broker outage must not turn it into
    an error page. The failure is logged, the key is released so the next vote tries again, and the
    beat refit catches up in any case.
    """
    debounce = int(getattr(settings, "ARENA_REFIT_DEBOUNCE_S", 30))
    try:
        token = uuid.uuid4().hex  # names the waiting refit: the task knows the key is its own
        if not cache.add(REFIT_PENDING_KEY, token, timeout=max(REFIT_PENDING_TIMEOUT_S, debounce + 60)):
            return False
        send(RATINGS_REFIT, queue=DEFAULT, args=[False, token], countdown=debounce)
    except Exception:
        log.exception("could not schedule a ratings refit; the periodic refit will catch up")
        try:
            cache.delete(REFIT_PENDING_KEY)
        except Exception:
            pass
        return False
    return True


# The live fit (arena.ratings.live): the first vote after a live fit started adds this key and enqueues
# ratings_live with a countdown of ARENA_LIVE_DEBOUNCE_S; the task deletes the key before it reads the
# votes, so a vote that commits after that read schedules the next fit, and every vote is in a fit that
# starts at most ARENA_LIVE_DEBOUNCE_S after it (plus queueing: however long it waits, no second fit is
# queued behind it). The key's lifetime only matters when a task is lost: the first vote after it
# expires schedules again.
LIVE_PENDING_KEY = "arena:ratings_live:pending"
LIVE_PENDING_TIMEOUT_S = 120


def ratings_live_schedule() -> bool:
    """Enqueue a debounced live point fit; call after the vote committed. True when enqueued. Never
    raises (as :func:`ratings_refit_schedule`)."""
    delay = float(getattr(settings, "ARENA_LIVE_DEBOUNCE_S", 0.25))
    try:
        if not cache.add(LIVE_PENDING_KEY, 1, timeout=LIVE_PENDING_TIMEOUT_S):
            return False
        send(RATINGS_LIVE, queue=DEFAULT, countdown=delay)
    except Exception:
        log.exception("could not schedule a live ratings fit; the next vote tries again")
        try:
            cache.delete(LIVE_PENDING_KEY)
        except Exception:
            pass
        return False
    return True


def ratings_live_followup() -> None:
    """Enqueue one more live fit (the marker stays: it stands for the votes this fit will count). Never
    raises."""
    try:
        send(RATINGS_LIVE, queue=DEFAULT, countdown=float(getattr(settings, "ARENA_LIVE_DEBOUNCE_S", 0.25)))
    except Exception:
        log.exception("could not schedule a live ratings fit; the next vote tries again")


def release_enqueue() -> None:
    """A data release (arena.publication.releases.release_build), once the caller's transaction commits."""
    transaction.on_commit(lambda: send(RELEASE_BUILD, queue=DEFAULT))


# Prompt categories (docs/categories.md): the first vote adds this key and enqueues categories_tag on the
# judge queue after ARENA_CATEGORY_DEBOUNCE_S, so the votes until it starts are tagged in one batch; the
# key stays until the task starts (it deletes it), so one run at most waits however busy the judge queue
# is. The task sends itself again while votes wait, and beat catches up after a lost task.
CATEGORIES_PENDING_KEY = "arena:categories_tag:pending"
CATEGORIES_PENDING_TIMEOUT_S = 15 * 60


def categories_tag_schedule(*, countdown: float | None = None) -> bool:
    """Enqueue a debounced tagging run when a tagger is configured; True when enqueued. Never raises (the
    votes are committed; beat's run catches up)."""
    if not getattr(settings, "ARENA_CATEGORY_TAGGER", None):
        return False
    delay = float(getattr(settings, "ARENA_CATEGORY_DEBOUNCE_S", 10)) if countdown is None else countdown
    try:
        if countdown is None and not cache.add(CATEGORIES_PENDING_KEY, 1, timeout=CATEGORIES_PENDING_TIMEOUT_S):
            return False
        send(CATEGORIES_TAG, queue=JUDGE, countdown=delay or None)
    except Exception:
        log.exception("could not schedule prompt tagging; the periodic run will catch up")
        if countdown is None:
            try:
                cache.delete(CATEGORIES_PENDING_KEY)  # the next vote tries again
            except Exception:
                pass
        return False
    return True
