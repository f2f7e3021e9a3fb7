"""The Celery app. Configuration comes from Django settings (``CELERY_*``, the beat schedule
included), tasks from each app's ``tasks.py`` (autodiscovered) and from :mod:`workers.diagnostics`.

No app task is named here: each task declares its queue where it is defined
(``@shared_task(declared_queue=...)``, routed by :func:`workers.queues.route_by_declared_queue`), and the
apps enqueue by name with an explicit queue (``arena.play.dispatch``, ``leaderboard.dispatch``)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_shutdown, worker_shutdown

from workers import queues
from workers.runtime import pool_close_on_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("podium")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_queues=queues.task_queues(),
    task_default_queue=queues.DEFAULT,
    task_default_exchange=queues.DEFAULT,
    task_default_routing_key=queues.DEFAULT,
    task_routes=(queues.route_by_declared_queue,),
    imports=("workers.diagnostics", "workers.metrics", "workers.requestid"),
    # One task at a time per process: generation and evaluation hold a model in memory.
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)
app.autodiscover_tasks()


def ensure_broker_folders() -> None:
    """Create the filesystem transport's folders (the embedded broker) if it is in use."""
    options = app.conf.broker_transport_options or {}
    if (app.conf.broker_url or "").startswith("filesystem://"):
        for key in ("data_folder_in", "data_folder_out", "control_folder", "processed_folder"):
            if options.get(key):
                os.makedirs(options[key], exist_ok=True)


ensure_broker_folders()
# Prefork children get worker_process_shutdown; the threads and solo pools run tasks in the main
# process, which gets worker_shutdown. Either way the loaded models (vLLM engines) are closed.
worker_process_shutdown.connect(pool_close_on_shutdown, weak=False)
worker_shutdown.connect(pool_close_on_shutdown, weak=False)
