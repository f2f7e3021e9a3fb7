"""Account reads: an owner's API tokens (never the tokens themselves: only prefixes are stored)."""

from __future__ import annotations

from django.db.models import QuerySet

from leaderboard.models import ApiToken


def tokens_for_owner(owner) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(owner=owner).order_by("revoked_at", "-created_at", "-id")
