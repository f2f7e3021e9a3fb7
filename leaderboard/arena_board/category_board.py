"""What the arena board adds for prompt categories: the selector's entries with their vote counts, and on
a tagged category's page the tagger, its protocol version and its agreement with staff (docs/categories.md)."""

from __future__ import annotations

from arena.categories import selectors as selectors_categories
from arena.categories.tagger import category_label


def categories_counted() -> tuple[list[str], dict[str, int]]:
    """The categories that have snapshots (``overall`` first) and each one's counted votes: one query."""
    counts = selectors_categories.category_vote_counts()
    return list(counts), counts


def category_choices(categories: list[str], counts: dict[str, int] | None = None) -> list[tuple[str, str]]:
    """``(value, label)`` for the selector: each category with its counted votes, ``overall`` first."""
    counts = selectors_categories.category_vote_counts() if counts is None else counts
    out = []
    for category in categories:
        label = category_label(category)
        if category in counts:
            label = f"{label} ({counts[category]:,} vote{'' if counts[category] == 1 else 's'})"
        out.append((category, label))
    return out or [("overall", "Overall")]


def category_check(category: str, snapshot_settings: dict | None) -> dict | None:
    """For a tagged category: who tagged it (``tags``: protocol, version, tagger, threshold) and the
    tagger's agreement with staff (share, mid-p interval, checks); None for the other categories."""
    tags = (snapshot_settings or {}).get("tags")
    if tags is None and category not in selectors_categories.tagged_categories():
        return None
    found = selectors_categories.category_agreement(category)
    percent = {
        k: None if found[k] is None else round(100 * found[k])
        for k in ("value", "ci_low", "ci_high", "level")
    }
    return {"tags": tags, "agreement": found, "percent": percent}


def category_stamp(category: str) -> tuple:
    """Part of the board's cache key: changes when staff check a tag of ``category`` (no query for the
    categories no tagger makes)."""
    if category not in selectors_categories.tagged_categories():
        return ()
    return selectors_categories.review_stamp(category)
