"""One arena model's page (what it is, its retirement, its rating across refits) and the public record of
retired and unreleased models: plain data for the templates, read from arena's selectors."""

from __future__ import annotations

from arena.catalogue.selectors import descriptions
from arena.ratings import selectors as rating_selectors
from arena.ratings.anchor import NOT_PUBLIC
from arena.ratings.selectors import rating_history, retirements_public
from leaderboard.arena_board.charts import history_figure
from leaderboard.arena_board.page import METHODS, category_label


def _anchor_label(anchor: dict | None) -> str:
    """A point's scale; an anchor not shown publicly is not named (rating_history marks it ``not_public``)."""
    if not anchor or not (anchor.get("model") or anchor.get("not_public")):
        return "centred (mean 1000)"
    name = NOT_PUBLIC if anchor.get("not_public") else anchor["model"]
    if not anchor.get("applied"):
        return f"centred until {name} has votes"
    return f"{name} at {anchor['rating']:g}"


def arena_model_page(name: str, *, method: str, category: str) -> dict | None:
    """The page's context, or None when there is no such public model (not in the catalogue, or tested
    but not shown publicly: its page does not exist)."""
    about = descriptions(names=[name]).get(name)
    if about is None or not about["public"]:
        return None
    history = rating_history(name, method=method, category=category)
    changes = []
    for before, after in zip(history, history[1:]):
        if _anchor_label(before["anchor"]) != _anchor_label(after["anchor"]):
            changes.append(
                {
                    "at": after["at"],
                    "was": _anchor_label(before["anchor"]),
                    "now": _anchor_label(after["anchor"]),
                }
            )
    for point in history:
        point["scale"] = _anchor_label(point["anchor"])
    title = f"{name}: {METHODS[method]} rating, {category_label(category).lower()}, across refits"
    return {
        "model": name,
        "about": about,
        "method": method,
        "methods": list(METHODS.items()),
        "category": category,
        "categories": [(c, category_label(c)) for c in rating_selectors.snapshot_categories()]
        or [("overall", "Overall")],
        "history": list(reversed(history)),  # newest first in the table
        "anchor_changes": changes,
        "figure": history_figure(history, changes, title) if history else None,
    }


def arena_retired_page() -> dict:
    return retirements_public()
