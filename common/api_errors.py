"""The API's error answers, served and documented alike.

Every ``/api/`` answer is JSON, errors included: a 400 names what was wrong with the request (DRF's
validation errors: a message or a list of messages per parameter, or ``detail``), a 404 says what was
not found, a 429 says when to retry. A URL under ``/api/`` that matches no route (``/api/runs/abc/``)
is a JSON 404 too, not the site's HTML page. The schema hook documents these answers on every
operation, so clients and schemathesis know them.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults

API_PREFIX = "/api/"

_DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
_MESSAGES = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
_VALIDATION = {"type": "object", "additionalProperties": _MESSAGES, "minProperties": 1}

ERROR_RESPONSES = {
    "400": ("The request's parameters are invalid; the body says which and why.", "ValidationErrors"),
    "404": ("Nothing here: no such object, or not visible to the requester.", "ErrorDetail"),
    "429": ("Too many requests; retry after the time the body and Retry-After give.", "ErrorDetail"),
}


def not_found(request, exception):
    """handler404: JSON under ``/api/``, the site's page elsewhere."""
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": f"no API endpoint or object at {request.path[:200]}"}, status=404)
    return defaults.page_not_found(request, exception)


def api_route_missing(request, *args, **kwargs):
    """The last URL pattern: an ``/api/`` URL that no route matched, as the JSON 404 above.

    ``/api/runs`` still redirects to ``/api/runs/`` (APPEND_SLASH), as it did before this pattern
    existed: CommonMiddleware redirects only URLs that resolve to nothing.
    """
    if settings.APPEND_SLASH and not request.path_info.endswith("/"):
        try:
            match = resolve(request.path_info + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not api_route_missing:
            return HttpResponsePermanentRedirect(request.get_full_path(force_append_slash=True))
    return not_found(request, None)


def document_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: the error answers above on every ``/api/`` operation."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorDetail", _DETAIL)
    schemas.setdefault("ValidationErrors", _VALIDATION)
    for path, operations in result.get("paths", {}).items():
        if not path.startswith(API_PREFIX):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for code, (description, name) in ERROR_RESPONSES.items():
                responses.setdefault(
                    code,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
                    },
                )
    return result
