"""Tasks that check the plumbing: a worker answers ``ping`` on whichever queue it serves."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="workers.ping")
def ping(payload=None):
    """Echo ``payload`` with the answering worker's host and process id."""
    return {"pong": payload, "host": socket.gethostname(), "pid": os.getpid()}
