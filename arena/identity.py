"""Salted hashes of voter identifiers: the raw session key and IP address are never stored."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from django.conf import settings


def salted_hash(value: str, *, purpose: str) -> str:
    """HMAC-SHA256 of ``value`` keyed by the site's secret and salt; ``purpose`` separates uses."""
    key = f"{settings.SECRET_KEY}|{settings.ARENA_HASH_SALT}|{purpose}".encode()
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


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


def session_key(request) -> str:
    """The voter's session key, creating the session if it does not exist yet."""
    if not request.session.session_key:
        request.session["arena"] = True
        request.session.save()
    return request.session.session_key


def voter_hashes(request) -> tuple[str, str]:
    """``(session_hash, ip_hash)`` for the voter making ``request``."""
    return salted_hash(session_key(request), purpose="session"), salted_hash(client_ip(request), purpose="ip")
