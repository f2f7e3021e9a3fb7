"""Salted hashes of voter identifiers: the raw session key and IP address are never stored.

A voter is their arena session (created by ``GET /arena/`` and nothing else) and their network: the
IPv4 address, or the /64 prefix of an IPv6 address (one subscriber usually holds a whole /64 and can pick
any address in it, so per-address limits would be no limits). An IPv4-mapped IPv6 address
(``::ffff:203.0.113.9``) is its IPv4 address.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from django.conf import settings

from common.client import client_ip

ARENA_SESSION_FLAG = "arena"
IPV6_PREFIX = 64


def salted_hash(value: str, *, purpose: str) -> str:
    """HMAC-SHA256 of ``value`` keyed by the site's secret and salt; ``purpose`` separates uses."""
    key = f"{settings.SECRET_KEY}|{settings.ARENA_HASH_SALT}|{purpose}".encode()
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def session_key(request) -> str:
    """The voter's session key, creating the session if it does not exist yet (``GET /arena/`` only)."""
    if arena_session_key(request) is None:
        request.session[ARENA_SESSION_FLAG] = True
        request.session.save()
    return request.session.session_key


def arena_session_key(request) -> str | None:
    """The key of the arena session ``GET /arena/`` created, or None; never creates one.

    Reading the flag loads the session, so a forged or expired cookie reads as no session (a session key
    alone proves nothing: Django hands back whatever the cookie said until the session is loaded).
    """
    return arena_key_of(request.session)


def arena_key_of(session) -> str | None:
    """:func:`arena_session_key` for a session object (a WebSocket's ``scope["session"]``); loads it."""
    if session is None or session.get(ARENA_SESSION_FLAG) is not True:
        return None
    return session.session_key


def ip_bucket(address: str) -> str:
    """The unit an address is limited and hashed by: an IPv4 address, or an IPv6 /64 prefix."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # "unknown" or something a proxy wrote: limited as itself
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        prefix = (int(ip) >> (128 - IPV6_PREFIX)) << (128 - IPV6_PREFIX)
        return str(ipaddress.IPv6Network((prefix, IPV6_PREFIX)))
    return str(ip)


def address_hash(request) -> str:
    """Salted hash of the client's address bucket (:func:`ip_bucket`)."""
    return salted_hash(ip_bucket(client_ip(request)), purpose="ip")


def voter_hashes(request) -> tuple[str, str] | None:
    """``(session_hash, ip_hash)`` for the voter making ``request``; None without an arena session."""
    key = arena_session_key(request)
    if key is None:
        return None
    return salted_hash(key, purpose="session"), address_hash(request)
