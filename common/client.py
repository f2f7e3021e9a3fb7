"""Who is asking: the client's address behind the documented number of trusted proxies."""

from __future__ import annotations

import ipaddress

from django.conf import settings


def client_ip(request) -> str:
    """The client's address: REMOTE_ADDR, or behind ``TRUSTED_PROXY_COUNT`` proxies the address the
    outermost of them saw (the entry that many places from the right of X-Forwarded-For).

    Entries further left were written by the client and prove nothing; a header that is missing,
    too short or not an IP address falls back to REMOTE_ADDR.
    """
    remote = request.META.get("REMOTE_ADDR") or "unknown"
    hops = getattr(settings, "TRUSTED_PROXY_COUNT", 0)
    if not hops:
        return remote
    entries = [entry.strip() for entry in request.META.get("HTTP_X_FORWARDED_FOR", "")[:2000].split(",")]
    if len(entries) < hops:
        return remote
    try:
        return str(ipaddress.ip_address(entries[-hops]))
    except ValueError:
        return remote


def client_ip_or_none(request) -> str | None:
    """:func:`client_ip` for code that stores an IP address field: None when the request has none
    (a request built in code, such as a test client's ``force_login``)."""
    address = client_ip(request)
    return None if address == "unknown" else address
