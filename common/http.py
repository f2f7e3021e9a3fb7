"""Method and CSRF answers shared by the site's views.

- :func:`read_only`: a view that only reads (a page, an export, a health check) answers GET and HEAD,
  and any other method with 405 and ``Allow: GET, HEAD``. Before, a POST to ``/leaderboard/scores.csv``
  got the CSRF middleware's HTML 403 ("CSRF verification failed") instead of saying the method is
  wrong, and ``HEAD /healthz`` (what load balancers send) was a 405. CSRF protection guards state
  changes, which such views never make, so exempting them loses nothing.
- :func:`csrf_failure` (``CSRF_FAILURE_VIEW``): a refused CSRF check under ``/arena/`` (the arena's
  JSON endpoints) or ``/api/`` answers JSON like every other error there; elsewhere Django's page.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.views import csrf
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

JSON_PREFIXES = ("/arena/", "/api/")


def read_only(view):
    """GET and HEAD only; other methods 405 (not a CSRF 403): see the module docs."""
    return csrf_exempt(require_safe(view))


def csrf_failure(request, reason: str = "", template_name: str = csrf.CSRF_FAILURE_TEMPLATE_NAME):
    """``CSRF_FAILURE_VIEW``: JSON under the JSON prefixes, Django's own page elsewhere."""
    if request.path.startswith(JSON_PREFIXES) and request.path != "/arena/":
        key = "detail" if request.path.startswith("/api/") else "error"  # each prefix's error shape
        return JsonResponse(
            {key: f"CSRF check failed ({reason}): load the page first, then send its csrftoken cookie's "
                  "value in the X-CSRFToken header"},
            status=403,
        )  # fmt: skip
    return csrf.csrf_failure(request, reason=reason, template_name=template_name)
