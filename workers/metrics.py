"""Prometheus metrics: what the site and its workers count and time, and the queue depths.

Web processes and Celery worker processes are separate, so the metrics live in prometheus_client's
multiprocess mode: each process writes its samples to files under ``PROMETHEUS_MULTIPROC_DIR`` (the
settings point it at ``PODIUM_METRICS_DIR``, default ``var/metrics``) and the ``/metrics`` view adds them
up. Clear that folder when the site starts (``make demo`` and the container entry point do).

- ``podium_votes_total{counted}``                    votes accepted (``rate()`` gives votes per second)
- ``podium_battle_side_seconds{side,outcome}``       a turn's creation to one side's last token or error
- ``podium_task_seconds{task,outcome}``               every Celery task's run time by task name, so
  evaluations, judge runs and refits each have theirs (docs/operations.md names them)
- ``podium_refit_seconds``                            a ratings refit (every category, bootstrap included)
- ``podium_queue_depth{queue}``                       messages waiting in each Celery queue, read from the
  broker at scrape time (-1 when the broker does not answer)
"""

from __future__ import annotations

import logging
import os
import socket
import time

from celery import signals
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess, values
from prometheus_client.core import GaugeMetricFamily

from workers import queues
from workers.celery import app

logger = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
LONG_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400)
QUEUE_TIMEOUT_S = 2.0



def process_identifier() -> str:
    """Host name and pid: containers sharing one metrics volume each number their processes from 1."""
    return f"{socket.gethostname()}-{os.getpid()}"


if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    values.ValueClass = values.MultiProcessValue(process_identifier=process_identifier)

VOTES = Counter("podium_votes", "Votes accepted by the arena.", ["counted"])
BATTLE_SIDE_SECONDS = Histogram(
    "podium_battle_side_seconds",
    "Seconds from a turn's creation to the end of one side's answer.",
    ["side", "outcome"],
    buckets=LATENCY_BUCKETS,
)
TASK_SECONDS = Histogram(
    "podium_task_seconds", "Run time of Celery tasks.", ["task", "outcome"], buckets=LONG_BUCKETS
)
REFIT_SECONDS = Histogram("podium_refit_seconds", "Run time of a ratings refit.", buckets=LONG_BUCKETS)
LIVE_SECONDS = Histogram("podium_live_fit_seconds", "Run time of a live point fit.", buckets=LATENCY_BUCKETS)


def vote_counted(counted: bool) -> None:
    VOTES.labels(counted="true" if counted else "false").inc()


def battle_side_observe(side: str, outcome: str, seconds: float) -> None:
    BATTLE_SIDE_SECONDS.labels(side=side, outcome=outcome).observe(max(0.0, seconds))


class QueueDepthCollector:
    """``podium_queue_depth{queue}`` from the broker: a passive declare per queue (Redis, RabbitMQ and the
    filesystem transport all answer it with the message count)."""

    def collect(self):
        family = GaugeMetricFamily("podium_queue_depth", "Messages waiting in a Celery queue.", labels=["queue"])
        for name, depth in queue_depths().items():
            family.add_metric([name], depth)
        yield family


def queue_depths(names: tuple[str, ...] = queues.ALL_QUEUES) -> dict[str, int]:
    """Messages waiting in each queue; -1 for a queue the broker could not report on."""
    depths: dict[str, int] = {}
    try:
        with app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=QUEUE_TIMEOUT_S)
            for name in names:
                channel = connection.channel()
                try:
                    depths[name] = int(channel.queue_declare(queue=name, passive=True).message_count)
                except Exception as exc:  # a queue never declared (RabbitMQ answers 404) or a broker error
                    logger.debug("queue depth of %s unavailable: %s", name, exc)
                    depths[name] = 0 if "NOT_FOUND" in str(exc) else -1
                finally:
                    try:
                        channel.close()
                    except Exception:  # noqa: BLE001 - a channel the broker already closed
                        pass
    except Exception as exc:
        logger.warning("broker unreachable for queue depths: %s", exc)
        return {name: -1 for name in names}
    return depths


def exposition() -> tuple[bytes, str]:
    """The text exposition of every process's metrics plus the queue depths."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:  # one process: its own default registry
        from_default(registry)
    registry.register(QueueDepthCollector())
    return generate_latest(registry), "text/plain; version=0.0.4; charset=utf-8"


def from_default(registry: CollectorRegistry) -> None:
    for metric in (VOTES, BATTLE_SIDE_SECONDS, TASK_SECONDS, REFIT_SECONDS, LIVE_SECONDS):
        registry.register(metric)


# Task timing through Celery's signals: every task, by name and outcome.
_STARTED: dict[str, float] = {}


@signals.task_prerun.connect
def _task_started(task_id=None, **_):
    if task_id:
        _STARTED[task_id] = time.monotonic()


@signals.task_postrun.connect
def _task_finished(task_id=None, task=None, state=None, **_):
    started = _STARTED.pop(task_id, None)
    if started is not None and task is not None:
        outcome = "success" if state == "SUCCESS" else (state or "unknown").lower()
        TASK_SECONDS.labels(task=task.name, outcome=outcome).observe(time.monotonic() - started)


@signals.worker_process_shutdown.connect
def _process_gone(pid=None, **_):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(f"{socket.gethostname()}-{pid or os.getpid()}")
