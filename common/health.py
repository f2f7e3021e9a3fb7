"""``/healthz``: is the database answering, and is the Celery broker reachable?"""

from __future__ import annotations

from django.conf import settings
from django.db import connections
from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from common.http import read_only
from common.urls import redact
from workers.celery import app as celery_app

BROKER_TIMEOUT_S = 2.0


def database_status() -> dict:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not answering"
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}".strip()[:300]}
    return {"ok": True, "vendor": connections["default"].vendor}


def broker_status() -> dict:
    url = celery_app.conf.broker_url or ""
    try:
        with celery_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_S)
            connection.default_channel  # noqa: B018 - opens a channel: proves the transport works
    except Exception as exc:
        return {"ok": False, "url": redact(url), "error": f"{type(exc).__name__}: {exc}".strip()[:300]}
    return {"ok": True, "url": redact(url), "transport": url.split("://", 1)[0]}


@never_cache
@read_only
def healthz(request):
    checks = {"database": database_status(), "broker": broker_status()}
    failing = [name for name, check in checks.items() if not check["ok"]]
    body = {"status": "ok" if not failing else "unavailable", "failing": failing, **checks}
    if settings.DEBUG is False:
        # Connection errors can carry host names; keep them out of a public page.
        for check in checks.values():
            if "error" in check:
                check["error"] = check["error"].split(":", 1)[0]
    return JsonResponse(body, status=200 if not failing else 503)
