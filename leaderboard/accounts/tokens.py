"""Personal API tokens: created and revoked by their owner, stored as SHA-256 digests only.

A token is 43 random URL-safe characters after ``pdm_``; its first 12 characters are kept to show
the owner which token is which. Tokens are high-entropy secrets, so one SHA-256 (not a slow
password hash) is what guessing would have to invert.
"""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from leaderboard.models import ApiToken

PREFIX = "pdm_"
MAX_TOKENS = 20


class TokenError(ValueError):
    pass


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def token_create(*, owner, name: str) -> tuple[ApiToken, str]:
    """A new token for ``owner``: (its row, the token itself, shown once and never stored)."""
    name = (name or "").strip()[:100]
    if not name:
        raise TokenError("Give the token a name (e.g. the machine or CI job that will use it).")
    with transaction.atomic():
        if ApiToken.objects.filter(owner=owner, revoked_at__isnull=True).count() >= MAX_TOKENS:
            raise TokenError(f"You have {MAX_TOKENS} active tokens; revoke one first.")
        raw = PREFIX + secrets.token_urlsafe(32)
        token = ApiToken.objects.create(owner=owner, name=name, prefix=raw[:12], digest=_digest(raw))
    return token, raw


def token_revoke(*, owner, token_id: int) -> bool:
    """Revoke one of ``owner``'s tokens; False when there is no such active token."""
    return bool(
        ApiToken.objects.filter(owner=owner, pk=token_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    )


def tokens_revoke(token_ids) -> int:
    """Revoke tokens whoever owns them (the admin's action); how many were still active."""
    return ApiToken.objects.filter(pk__in=list(token_ids), revoked_at__isnull=True).update(revoked_at=timezone.now())


def token_user(raw: str):
    """The user a token belongs to; raises TokenError saying why not (unknown, revoked, inactive)."""
    if not raw.startswith(PREFIX) or len(raw) > 100:
        raise TokenError("Invalid API token.")
    token = ApiToken.objects.select_related("owner").filter(digest=_digest(raw)).first()
    if token is None:
        raise TokenError("Invalid API token.")
    if token.revoked_at is not None:
        raise TokenError(f"This API token ({token.prefix}…) was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC.")
    if not token.owner.is_active:
        raise TokenError("The account of this API token is disabled.")
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.owner


def bearer(header: str) -> str | None:
    """The token in an ``Authorization: Bearer <token>`` (or ``Token <token>``) header, else None."""
    scheme, _, value = (header or "").strip().partition(" ")
    if scheme.lower() in ("bearer", "token") and value.strip():
        return value.strip()
    return None
