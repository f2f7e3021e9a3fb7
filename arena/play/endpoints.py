"""The shared path of the arena's JSON endpoints: errors as JSON, and the voter's POST (form, session,
agreement to the terms, rate limit, then the service, whose refusals become JSON)."""

from __future__ import annotations

from django.http import JsonResponse

from arena.play import base
from arena.play.identity import voter_hashes
from arena.play.ratelimit import RateLimited, hit
from arena.publication.consent import consent_of, missing_message
from common.outages import is_outage, unavailable

NO_SESSION_MESSAGE = (
    "No arena session: open /arena/ first (with cookies allowed); battles and votes need the session it creates."
)


def error_response(message: str, status: int, **headers) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    for key, value in headers.items():
        response[key.replace("_", "-")] = value
    return response


def form_error(form) -> JsonResponse:
    first = next(iter(form.errors.values()))[0]
    return error_response(str(first), 400)


def limited(action: str, hashes: tuple[str, str], per_window: int) -> JsonResponse | None:
    session_hash, ip_hash = hashes
    try:
        hit(action, session_hash=session_hash, ip_hash=ip_hash, per_window=per_window)
    except RateLimited as exc:
        return error_response(str(exc), 429, Retry_After=str(exc.retry_after))
    return None


def voter_action(request, form_class, action: str, per_window: int, act) -> JsonResponse:
    """The shared path of the arena's POSTs: validate the form, check the session and its agreement to the
    current terms, apply the voter's rate limit, call the service through
    ``act(cleaned_data, session_hash, ip_hash, consent)``, and turn its refusals into JSON."""
    form = form_class(request.POST)
    if not form.is_valid():
        return form_error(form)
    try:
        hashes = voter_hashes(request)
        if hashes is None:  # no cookie, a forged or expired one: refused, and no session is made for it
            return error_response(NO_SESSION_MESSAGE, 403)
        consent = consent_of(request.session)
        if consent is None:  # no battle, turn or vote without agreeing to the current terms
            return error_response(missing_message(), 403)
        if refusal := limited(action, hashes, per_window):
            return refusal
        return act(form.cleaned_data, *hashes, consent)
    except base.ArenaError as exc:
        headers = {"Retry_After": str(exc.retry_after)} if exc.retry_after else {}
        return error_response(str(exc), exc.status, **headers)
    except Exception as exc:
        # The database restarting: the voter tries again; a vote whose statement committed is then
        # refused as already cast (one per battle), never stored twice.
        if is_outage(exc):
            return unavailable(request)
        raise
