"""Answers while a service behind the site is down: 503 with Retry-After, never a 500.

A PostgreSQL restart or a Redis restart lasts seconds. Requests caught in it get "try again shortly"
(JSON under ``/api/`` and ``/arena/``, plain text elsewhere) with a ``Retry-After`` header, which
clients and proxies honour; a real bug still gets the ordinary 500 page.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.views import defaults
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
MESSAGE = "The service is briefly unavailable; please try again in a few seconds."
OUTAGES = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError)
JSON_PREFIXES = ("/api/", "/arena/")


def is_outage(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a lost database or Redis connection."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, OUTAGES):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def unavailable(request) -> HttpResponse:
    """The 503 answer itself, for a request caught in an outage."""
    if request.path.startswith(JSON_PREFIXES):
        response = JsonResponse({"error": MESSAGE, "detail": MESSAGE}, status=503)
    else:
        response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def server_error(request):
    """handler500: a 503 with Retry-After when the exception being handled is an outage."""
    exc = sys.exc_info()[1]
    if is_outage(exc):
        log.warning("%s %s during an outage: %r", request.method, request.path[:200], exc)
        return unavailable(request)
    return defaults.server_error(request)
