"""Salted hashes of voter identifiers: the raw session key and IP address are never stored."""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

from common.client import client_ip


def salted_hash(value: str, *, purpose: str) -> str:
    """HMAC-SHA256 of ``value`` keyed by the site's secret and salt; ``purpose`` separates uses."""
    key = f"{settings.SECRET_KEY}|{settings.ARENA_HASH_SALT}|{purpose}".encode()
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def session_key(request) -> str:
    """The voter's session key, creating the session if it does not exist yet."""
    if not request.session.session_key:
        request.session["arena"] = True
        request.session.save()
    return request.session.session_key


def voter_hashes(request) -> tuple[str, str]:
    """``(session_hash, ip_hash)`` for the voter making ``request``."""
    return salted_hash(session_key(request), purpose="session"), salted_hash(client_ip(request), purpose="ip")
