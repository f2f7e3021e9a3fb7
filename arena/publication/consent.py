"""Voters' agreement to the arena's terms: what is collected, what is published and when.

``GET /arena/`` shows the terms (``templates/arena/terms.html``, version ``ARENA_TERMS_VERSION``)
before the first message; ``POST /arena/consent/`` with that version stores the agreement in the
voter's session (version and time). Starting a battle, adding a turn, voting and the battle's
WebSocket all need the agreement to the *current* version: bumping ``ARENA_TERMS_VERSION`` when the
text changes asks every voter again. Battles and votes carry the version and time they were made
under.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone

SESSION_KEY = "arena_consent"


class ConsentError(ValueError):
    """The version agreed to is not the current one (or not a version at all)."""


def terms_version() -> str:
    return settings.ARENA_TERMS_VERSION


def publish_when(delay_s: float | None = None) -> str:
    """When a battle becomes public, in the terms' words (``ARENA_PUBLISH_DELAY_S`` after the vote, at
    the first rating refit that covers it): "at the first rating refit after your vote" at no delay,
    then minutes, hours or days, rounded as a person would say them."""
    delay = float(settings.ARENA_PUBLISH_DELAY_S if delay_s is None else delay_s)
    if delay < 60:
        return "at the first rating refit after your vote (refits run every few minutes)"
    if delay < 3600:
        minutes = round(delay / 60)
        return f"about {minutes} minute{'s' if minutes != 1 else ''} after your vote, at the next rating refit"
    hours = delay / 3600
    if hours < 48:
        shown = f"{hours:.1f}".rstrip("0").rstrip(".")
        return f"about {shown} hour{'' if shown == '1' else 's'} after your vote, at the next rating refit"
    days = round(hours / 24)
    return f"about {days} days after your vote, at the next rating refit"


def missing_message() -> str:
    return (
        f"Agree to the arena's terms first (version {terms_version()}): open /arena/ and read what is collected "
        "and published; no battle starts without it."
    )


def consent_of(session) -> dict | None:
    """``{"version", "at"}`` when the session agreed to the current terms, else None (older versions too)."""
    if session is None:
        return None
    value = session.get(SESSION_KEY)
    if not isinstance(value, dict) or value.get("version") != terms_version() or not isinstance(value.get("at"), str):
        return None
    return value


def consent_give(session, version: str) -> dict:
    """Store the agreement to ``version`` (which must be the current one) in ``session``."""
    if version != terms_version():
        raise ConsentError(
            f"The terms changed (now version {terms_version()}, not {str(version)[:40]!r}): reload /arena/ and read them again."
        )
    record = {"version": version, "at": timezone.now().isoformat()}
    session[SESSION_KEY] = record
    return record


def consent_fields(record: dict | None) -> dict:
    """The model fields a battle or vote stores: ``consent_version`` and ``consent_at``."""
    if not record:
        return {"consent_version": "", "consent_at": None}
    return {"consent_version": record["version"], "consent_at": datetime.fromisoformat(record["at"])}
