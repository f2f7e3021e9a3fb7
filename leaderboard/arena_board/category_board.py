"""What the arena board adds for categories: the selector's entries with their vote counts now, whether a
category is one the board knows, what a category without ratings yet holds and needs (and, for a tagged
one, how far the tagger has got), and on a tagged category's page the tagger, its protocol version and
its agreement with staff (docs/categories.md, docs/arena-ratings.md)."""

from __future__ import annotations

from arena.categories import selectors as selectors_categories
from arena.categories.tagger import category_label, tagger_name
from arena.ratings import selectors as rating_selectors
from arena.ratings.live import CORE_CATEGORIES


def categories_counted() -> tuple[list[str], dict[str, dict]]:
    """The categories the selector offers and what each holds now (:func:`arena.ratings.selectors.category_votes`:
    ``votes``, ``snapshot``, ``min_votes``), ``overall`` first. Offered: ``overall``, every category with a
    snapshot, and, while a tagger is configured, every configured tagged category (with the votes it
    holds so far, 0 before the first is tagged), so a visitor sees them before they fill."""
    tagged = selectors_categories.tagged_categories() if tagger_name() else []
    found = rating_selectors.category_votes(include=["overall", *tagged])
    offered = [c for c, entry in found.items() if c == "overall" or entry["snapshot"] or c in tagged]
    return offered, found


def category_known(category: str, found: dict[str, dict]) -> bool:
    """Whether the board has a page for ``category``: a built-in one, a configured tagged one (even with
    tagging off: the page says why it is empty), or one with counted votes or a snapshot (a language)."""
    return category in CORE_CATEGORIES or category in found or category in selectors_categories.tagged_categories()


def category_choices(categories: list[str], counts: dict[str, dict]) -> list[tuple[str, str]]:
    """``(value, label)`` for the selector: each category with its counted votes now, and where they are
    too few for ratings, from how many ratings appear ("Coding (2 votes; ratings from 50)")."""
    out = []
    for category in categories:
        label = category_label(category)
        entry = counts.get(category)
        if entry is not None:
            n, needed = entry["votes"], entry["min_votes"]
            label = f"{label} ({n:,} vote{'' if n == 1 else 's'}"
            label += f"; ratings from {needed:,})" if needed and n < needed else ")"
        out.append((category, label))
    return out or [("overall", "Overall")]


def category_status(category: str, entry: dict | None, *, rated: bool) -> dict | None:
    """What the board says in place of ratings for ``category`` (None where it has ``rated`` rows): the
    votes it holds now (``votes``) and needs (``needed``, ``missing``: how many more; 0 when it has enough
    and only waits for the next refit), and for a tagged category whether a tagger is configured
    (``tagging``) and the counted votes the tagger has not reached (``waiting``, ``failed``)."""
    if rated:
        return None
    entry = entry or {"votes": 0, "min_votes": None}
    votes, needed = entry["votes"], entry["min_votes"] or 1
    status = {
        "votes": votes,
        "needed": needed,
        "missing": max(needed - votes, 0),
        "tagged": category in selectors_categories.tagged_categories(),
        "tagging": bool(tagger_name()),
    }
    if status["tagged"] and status["tagging"]:
        status.update(selectors_categories.tagging_backlog())
    return status


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
