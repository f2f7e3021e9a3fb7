"""The arena page as a voter uses it, shared by the browser tests."""

from __future__ import annotations

VOTES_ENABLED = "Array.from(document.querySelectorAll('button.vote')).every(b => !b.disabled)"


def battle_ask(page, base: str, prompt: str, *, timeout_s: float, log) -> None:
    """Open the arena, agree to its terms where it asks, send ``prompt`` and wait until both answers are
    in (the vote buttons enable); on timeout an AssertionError carrying ``log()`` (the workers' logs)."""
    page.goto(f"{base}/arena/")
    if page.is_visible("#terms"):
        page.click("#agree")
        page.wait_for_selector("#terms", state="hidden")
    page.fill("#prompt", prompt)
    page.click("#send")
    try:
        page.wait_for_function(VOTES_ENABLED, timeout=timeout_s * 1000)
    except Exception:
        raise AssertionError(log()) from None
