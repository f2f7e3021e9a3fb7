"""A request id that follows one piece of work from the web view to the worker that finishes it.

The web middleware (``common.observability.RequestIdMiddleware``) sets it for each request (from a valid
``X-Request-ID`` header, else a new one); every task published while it is set carries it in a message
header, and the worker sets it again while that task runs, so the log lines of a battle's view and of the
generation tasks it started share one id. ``RequestIdFilter`` puts it on every log record, and
``JsonFormatter`` writes one JSON object per line (``PODIUM_LOG_FORMAT=json``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid

from celery import signals

HEADER = "podium_request_id"
_VALID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_current: contextvars.ContextVar[str] = contextvars.ContextVar("podium_request_id", default="")


def current() -> str:
    return _current.get()


def valid_or_new(candidate: str | None) -> str:
    """``candidate`` when it is a plain token (letters, digits, ``._-``, at most 64), else a new id."""
    if candidate and _VALID.fullmatch(candidate):
        return candidate
    return uuid.uuid4().hex


def activate(request_id: str) -> contextvars.Token:
    return _current.set(request_id)


def deactivate(token: contextvars.Token) -> None:
    _current.reset(token)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _current.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "") or _current.get(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


@signals.before_task_publish.connect
def _attach(headers=None, **_):
    request_id = _current.get()
    if request_id and headers is not None and HEADER not in headers:
        headers[HEADER] = request_id


_task_tokens: dict[str, contextvars.Token] = {}


@signals.task_prerun.connect
def _enter(task_id=None, task=None, **_):
    request_id = getattr(getattr(task, "request", None), HEADER, None) if task is not None else None
    if task_id:
        _task_tokens[task_id] = _current.set(valid_or_new(request_id) if request_id else "")


@signals.task_postrun.connect
def _leave(task_id=None, **_):
    token = _task_tokens.pop(task_id, None)
    if token is not None:
        try:
            _current.reset(token)
        except ValueError:  # set in another context (eager tasks nested in a request)
            _current.set("")
