"""Named queues.

``default``  short bookkeeping (rating refits, exports)
``generate`` arena answers, streamed token by token (CPU or GPU workers that serve arena models)
``evaluate`` benchmark runs of submitted checkpoints (GPU work where there is a GPU)
``judge``    judge-model comparisons

Each task names its queue where it is defined (``@shared_task(declared_queue=...)``) and
:func:`route_by_declared_queue` routes it there; this module names no task. (Celery's own ``queue``
task attribute would do the same but is deprecated for removal in Celery 6.) A worker chooses what it serves with ``-Q``: a GPU host runs ``celery -A workers worker -Q evaluate``.
Arena models served by one worker only can be given their own queue (``generate.<model>``), see
:func:`generation_queue`.
"""

from __future__ import annotations

import re

from kombu import Exchange, Queue

DEFAULT = "default"
GENERATE = "generate"
EVALUATE = "evaluate"
JUDGE = "judge"
ALL_QUEUES = (DEFAULT, GENERATE, EVALUATE, JUDGE)

# Tasks that run for minutes: acknowledge only when done, and requeue if the worker process dies,
# so a crash mid-run is retried (the tasks are idempotent: results are keyed, never appended).
LONG_TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True}

_QUEUE_SUFFIX = re.compile(r"[^A-Za-z0-9_.-]+")


def route_by_declared_queue(name, args, kwargs, options, task=None, **extra):
    """Celery router: the queue a task declared where it is defined (``declared_queue``), unless the
    sender named one (an explicit ``queue=`` given to ``apply_async`` wins, as Celery merges it last)."""
    queue = getattr(task, "declared_queue", None)
    return {"queue": queue} if queue else None


def generation_queue(queue_suffix: str | None) -> str:
    """The queue for an arena model's generations: ``generate`` or ``generate.<suffix>``.

    A suffix lets one worker own a model (say, the only host with its weights) while others
    serve the shared ``generate`` queue.
    """
    if not queue_suffix:
        return GENERATE
    cleaned = _QUEUE_SUFFIX.sub("-", queue_suffix).strip("-.")
    if not cleaned:
        raise ValueError(f"queue suffix {queue_suffix!r} has no usable characters")
    return f"{GENERATE}.{cleaned}"


def task_queues() -> tuple[Queue, ...]:
    return tuple(Queue(name, Exchange(name, type="direct"), routing_key=name) for name in ALL_QUEUES)
