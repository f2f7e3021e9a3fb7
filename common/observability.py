"""``/metrics`` for Prometheus, and the request-id middleware (``workers.requestid`` carries the id on).

``/metrics`` is for the operator's scraper, not the public: with ``METRICS_TOKEN`` set it wants
``Authorization: Bearer <token>``; without one it answers only clients on a loopback address.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache

from common.http import read_only
from evalcore.boundary.netutil import is_loopback
from workers import metrics, requestid

REQUEST_ID_HEADER = "X-Request-ID"


def _authorised(request) -> tuple[bool, str]:
    token = settings.METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        scheme, _, value = sent.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return True, ""
        return False, "send the metrics token as 'Authorization: Bearer <token>'"
    if is_loopback(request.META.get("REMOTE_ADDR", "")):
        return True, ""
    return False, "metrics are served to loopback clients only unless METRICS_TOKEN is set"


@never_cache
@read_only
def metrics_view(request):
    ok, reason = _authorised(request)
    if not ok:
        return JsonResponse({"detail": reason}, status=403)
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)


class RequestIdMiddleware:
    """Give each request an id (a valid incoming ``X-Request-ID`` or a new one), echo it in the response,
    and keep it set while the view runs so that logs and the tasks it dispatches carry it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = requestid.valid_or_new(request.headers.get(REQUEST_ID_HEADER))
        request.request_id = request_id
        token = requestid.activate(request_id)
        try:
            response = self.get_response(request)
        finally:
            requestid.deactivate(token)
        response[REQUEST_ID_HEADER] = request_id
        return response
