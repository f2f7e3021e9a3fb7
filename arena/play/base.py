"""What every arena service shares: the refusal type, the two sides, prompt cleaning."""

from __future__ import annotations

from django.conf import settings

SIDES = ("a", "b")


class ArenaError(Exception):
    """A request the arena refuses, with a message for the voter and an HTTP status."""

    def __init__(self, message: str, *, status: int = 400, retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # seconds, sent as Retry-After (a 503 while a service is down)


# What a voter reads when a service behind the arena (database, broker, cache) is down for a moment.
UNAVAILABLE_MESSAGE = "The arena is briefly unavailable; please try again in a few seconds."
UNAVAILABLE_RETRY_S = 5


def prompt_clean(prompt: object) -> str:
    if not isinstance(prompt, str):
        raise ArenaError("The prompt must be text.")
    prompt = prompt.replace("\x00", "").strip()
    if not prompt:
        raise ArenaError("Type a prompt first.")
    if len(prompt) > settings.ARENA_MAX_PROMPT_CHARS:
        raise ArenaError(f"The prompt is too long: at most {settings.ARENA_MAX_PROMPT_CHARS} characters.")
    return prompt

