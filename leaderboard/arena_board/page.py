"""What the arena leaderboard page shows, read from arena's rating snapshots (never fitted here).

Snapshots never change once written, so the board (table, notes and chart data) is rendered once per
set of latest snapshots and kept per process: a page view then costs three small queries (which
snapshots are latest, which categories exist) and a dictionary lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from urllib.parse import urlencode

from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from arena.catalogue.selectors import (
    BoardFilters,
    anchor_public,
    descriptions,
    extra_public,
    filter_choices,
    notes_public,
    rated_names,
    rows_public,
)
from arena.categories.tagger import category_label as arena_category_label
from arena.models import RatingSnapshot
from arena.ratings import selectors as rating_selectors
from arena.ratings.anchor import NOT_PUBLIC
from leaderboard.arena_board.category_board import (
    categories_counted,
    category_check,
    category_choices,
    category_known,
    category_stamp,
    category_status,
)
from leaderboard.arena_board.charts import snapshot_figures

_RENDERED: OrderedDict[tuple, dict] = OrderedDict()
_RENDERED_SIZE = 64
_LOCK = threading.Lock()

TOO_FEW_NOTE = "too few votes:"  # how a refit's and the live fit's notes open for a category not rated yet
METHODS = {"bt": "Bradley-Terry", "style": "Style-controlled Bradley-Terry"}
ELO_NOTE = (
    "Online Elo replays the votes once, in the order they arrived, moving both ratings a fixed step "
    "(K={k:g}) after each vote: recent votes weigh more than old ones and another order of the same votes "
    "gives other numbers (its interval is the spread over {orders} random orders, not sampling error). "
    "Bradley-Terry fits all votes at once, so vote order does not matter, and its bootstrap interval is "
    "what the ranks here are built from. The two agree on strong differences and can disagree on close "
    "ones."
)


def category_label(category: str) -> str:
    if category.startswith("language:"):
        return f"Language: {category.split(':', 1)[1]}"
    return {"overall": "Overall", "multi_turn": "Multi-turn", "long_prompt": "Long prompts", "no_ties": "Without ties"}.get(
        category, arena_category_label(category)
    )


def ratings_query(method: str, category: str, filters: BoardFilters) -> str:
    """The query of ``/api/ratings/`` for the rows the board shows (the same method, category and filters)."""
    params = {"method": method, "category": category, "organisation": filters.organisation, "licence": filters.licence}
    if filters.open_weights is not None:
        params["open_weights"] = "yes" if filters.open_weights else "no"
    if filters.retired:
        params["retired"] = "yes"
    return urlencode({k: v for k, v in params.items() if v is not None})


def _gap(a, b):
    """``a - b``, or None when either side is open (a provisional model's interval may be unbounded)."""
    return None if a is None or b is None else a - b


def _interval_rows(rows: list[dict], elo: dict[str, dict]) -> list[dict]:
    """Rows as shown: ordered by the rank shown (provisional models never first), then by rating."""
    shown = []
    for row in sorted(rows, key=lambda r: (r["rank_ub"], -r["rating"])):
        elo_row = elo.get(row["model"])
        shown.append(
            {
                "rank": row["rank_ub"],
                "rank_ci": row.get("rank_ci"),
                "model": row["model"],
                "rating": row["rating"],
                "ci_low": row["ci_low"],
                "ci_high": row["ci_high"],
                "minus": _gap(row["rating"], row["ci_low"]),
                "plus": _gap(row["ci_high"], row["rating"]),
                "provisional": bool(row.get("provisional")),
                "battles": row["battles"],
                "tied": bool(row.get("tied_with_above")),
                "tied_with": ", ".join(row.get("tied_with", [])),
                "elo": None if elo_row is None else elo_row["rating"],
                "elo_low": None if elo_row is None else elo_row["ci_low"],
                "elo_high": None if elo_row is None else elo_row["ci_high"],
                "about": row.get("about", {}),
                "retired": bool(row.get("about", {}).get("retired_at")),
            }
        )
    return shown


def before_after_rows(snapshot_rows: list[dict], before: dict | None) -> dict | None:
    """Ratings before and after confirmed anomalous voters' votes left the fit (two fits), or None."""
    if not before or not before.get("rows"):
        return None
    earlier = {row["model"]: row for row in before["rows"]}
    rows = []
    for row in snapshot_rows:
        old = earlier.get(row["model"])
        rows.append(
            {
                "model": row["model"], "after": row["rating"], "after_low": row["ci_low"], "after_high": row["ci_high"],
                "before": None if old is None else old["rating"],
                "before_low": None if old is None else old["ci_low"],
                "before_high": None if old is None else old["ci_high"],
                "change": None if old is None else row["rating"] - old["rating"],
            }
        )  # fmt: skip
    return {"vote_count": before.get("vote_count"), "rows": rows}


def scale_sentence(anchor: dict | None) -> str:
    """What the numbers are relative to (arena.ratings.anchor), from ``settings["anchor"]`` as the public
    sees it (:func:`arena.catalogue.selectors.anchor_public`: a model not shown publicly is not named)."""
    if anchor and anchor.get("refused"):
        return (
            f"Ratings are centred on a mean of 1000: the configured anchor is {NOT_PUBLIC}, so it is not used "
            f"(held at {anchor['refused']['rating']:g}, every rating here would be its distance to that model, "
            "publishing its rating)."
        )
    if not anchor or not (anchor.get("model") or anchor.get("not_public")):
        return "Ratings are centred on a mean of 1000."
    name = NOT_PUBLIC if anchor.get("not_public") else anchor["model"]
    if anchor.get("applied"):
        relative = " (in every bootstrap round: the others' intervals are relative to it)" if anchor.get("intervals") else ""
        if anchor.get("not_public"):
            return f"Ratings are anchored to {NOT_PUBLIC}, held at {anchor['rating']:g}{relative}."
        return f"Ratings are anchored: {name} is held at {anchor['rating']:g}{relative}."
    return (
        f"Ratings are centred on a mean of 1000 until the anchor model, {name}, has votes here "
        f"(it will then be held at {anchor['rating']:g})."
    )


def arena_board(
    *,
    method: str,
    category: str,
    categories: list[str],
    snapshot: RatingSnapshot | None,
    elo: RatingSnapshot | None,
    counts: dict[str, dict] | None = None,
    described: dict | None = None,
    filters: BoardFilters = BoardFilters(),
    status: dict | None | bool = False,
) -> dict:
    """Everything the board shows for one method (``bt`` or ``style``) and category, as plain data.

    ``snapshot`` is None when no refit has rated the category yet; ``rows`` is empty while there are too
    few votes. ``counts``: each category's votes now (:func:`categories_counted`); ``status``: what the
    board says in place of ratings, once (:func:`category_status`; None when the snapshot has rows).
    ``described`` (the catalogue, :func:`arena.catalogue.selectors.descriptions`) and ``filters`` pick the
    rows shown (:func:`arena.catalogue.selectors.rows_public`): never a model that is not public, retired
    ones only on request; ranks are among the rows shown (:func:`arena.catalogue.selectors.ranks_among`).
    """
    described = {} if described is None else described
    counts = {} if counts is None else counts
    rated = snapshot is not None and bool(snapshot.rows)
    board = {
        "method": method,
        "method_label": METHODS[method],
        "methods": list(METHODS.items()),
        "category": category,
        "category_label": category_label(category),
        "categories": category_choices(categories, counts),
        "status": category_status(category, counts.get(category), rated=rated) if status is False else status,
        "category_check": category_check(category, None if snapshot is None else snapshot.settings),
        "snapshot": None,
        "rows": [],
        "figures": None,
        "filters": filters,
        "choices": {"organisations": [], "licences": []},
        "ratings_query": ratings_query(method, category, filters),
    }
    if snapshot is None:
        return board
    elo_rows = {r["model"]: r for r in elo.rows} if elo is not None else {}
    settings = snapshot.settings
    public = rows_public(snapshot.rows, described, filters)
    everyone = rows_public(snapshot.rows, described, BoardFilters(retired=True))
    board.update(
        snapshot={
            "id": snapshot.id,
            "created_at": snapshot.created_at,
            "vote_count": snapshot.vote_count,
            "first_vote_at": snapshot.first_vote_at,
            "last_vote_at": snapshot.last_vote_at,
            "rounds": settings.get("bootstrap_rounds") or settings.get("rounds"),
            "interval": settings.get("interval", "bootstrap"),
            "level_percent": round(100 * settings.get("level", 0.95)),
            "ties": settings.get("ties", "half"),
            "prior": settings.get("prior", 0.0),
            "min_votes": settings.get("min_votes"),
            "provisional_votes": settings.get("provisional_votes"),
        },
        rows=_interval_rows(public, elo_rows),
        rated=len(everyone),
        retired_hidden=0 if filters.retired else sum(1 for r in everyone if r["about"].get("retired_at")),
        choices=filter_choices(snapshot.rows, described),
        scale=scale_sentence(anchor_public(settings.get("anchor"), described)),
        # The status says "too few votes" once; the snapshot's note saying the same is not repeated.
        notes=[
            note for note in notes_public(list(snapshot.extra.get("notes", [])), described)
            if rated or not note.startswith(TOO_FEW_NOTE)
        ],
        coefficients=snapshot.extra.get("coefficients", []),
        elo_note=ELO_NOTE.format(
            k=(elo.settings.get("k", 4.0) if elo else 4.0),
            orders=(elo.settings.get("orders", 0) if elo else 0),
        ),
        any_tied=any(r.get("tied_with_above") for r in public),
        any_provisional=any(r.get("provisional") for r in public),
        before_after=before_after_rows(public, snapshot.extra.get("before_voter_exclusion")),
    )
    if public:
        board["figures"] = snapshot_figures(public, extra_public(snapshot.extra, described), METHODS[method])
    return board


def arena_board_page(*, method: str, category: str, filters: BoardFilters = BoardFilters()) -> dict:
    """The rendered board for the page: ``html`` (safe), ``has_figures``, ``known`` (the board has a page
    for the category: when False, ``choices`` lists the categories it has and nothing is rendered).
    Rendered once per set of snapshots, vote counts, catalogue and filters (a retirement changes the board
    without a refit)."""
    categories, counts = categories_counted()  # the categories offered, and each one's votes now
    if not category_known(category, counts):
        return {"known": False, "choices": category_choices(categories, counts), "html": "", "has_figures": False}
    stamps = rating_selectors.snapshot_latest_stamp(method, category), rating_selectors.snapshot_latest_stamp("elo", category)
    kept, snapshot, elo = (_rated(stamps[0]), _rated(stamps[1])), None, None
    names = None if None in kept else kept[0] | kept[1]
    if names is None:  # snapshots not seen by this process: read them once, whole, rather than their rows apart
        snapshot = rating_selectors.snapshot_by_id(stamps[0][0]) if stamps[0] else None
        elo = rating_selectors.snapshot_by_id(stamps[1][0]) if stamps[1] else None
        names = _keep_rated(stamps[0], snapshot) | _keep_rated(stamps[1], elo)
    described = descriptions(names=names)  # not the scored-only models
    entry = counts.get(category)
    rated = bool(stamps[0] and entry and entry["snapshot"] and entry["snapshot_votes"] >= entry["min_votes"])
    status = category_status(category, entry, rated=rated)  # a tagged one's backlog changes without a vote
    votes_now = tuple((c, counts[c]["votes"], counts[c]["min_votes"]) for c in categories if c in counts)
    votes_now += ((category, *(counts[category][k] for k in ("votes", "min_votes"))) if category in counts else (),)
    key = (
        method, category, *stamps, votes_now, category_stamp(category), filters,
        tuple(sorted((status or {}).items())), hash(repr(sorted(described.items()))),
    )  # fmt: skip
    with _LOCK:
        if key in _RENDERED:
            _RENDERED.move_to_end(key)
            return _RENDERED[key]
    if snapshot is None and stamps[0]:
        snapshot = rating_selectors.snapshot_by_id(stamps[0][0])
    if elo is None and stamps[1]:
        elo = rating_selectors.snapshot_by_id(stamps[1][0])
    board = arena_board(
        method=method, category=category, categories=categories, snapshot=snapshot, elo=elo, counts=counts,
        described=described, filters=filters, status=status,
    )  # fmt: skip
    page = {
        "html": mark_safe(render_to_string("leaderboard/_arena_board.html", {"board": board})),
        "has_figures": bool(board["figures"]),
        "known": True,
        "intervals": {r["model"]: r for r in board["rows"]},
        "described": described,
        "filters": filters,
        "catalogue": key[-1],
        "refit_at": snapshot.created_at if snapshot is not None else None,
        "refit_votes": snapshot.vote_count if snapshot is not None else None,
    }
    with _LOCK:
        _RENDERED[key] = page
        while len(_RENDERED) > _RENDERED_SIZE:
            _RENDERED.popitem(last=False)
    return page


_NAMES: OrderedDict[tuple, frozenset[str]] = OrderedDict()


def _rated(stamp: tuple | None) -> frozenset[str] | None:
    """The models the snapshot ``(id, created_at)`` rates as this process has kept them (snapshots never
    change); empty for no snapshot, None where this process has not read it yet."""
    if stamp is None:
        return frozenset()
    with _LOCK:
        return _NAMES.get(stamp)


def _keep_rated(stamp: tuple | None, snapshot) -> frozenset[str]:
    """The models ``snapshot`` (read for ``stamp``) rates, kept for :func:`_rated`."""
    if stamp is None or snapshot is None:
        return frozenset()
    names = frozenset(rated_names(snapshot.rows))
    with _LOCK:
        _NAMES[stamp] = names
        while len(_NAMES) > _RENDERED_SIZE:
            _NAMES.popitem(last=False)
    return names


def age(seconds: float) -> str:
    """How long ago, in words: "0.4 s", "12 s", "8 minutes", "3 hours", "2 days"."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    unit, size = ("minute", 60) if seconds < 90 * 60 else ("hour", 3600) if seconds < 48 * 3600 else ("day", 86400)
    n = round(seconds / size)
    return f"{n} {unit}{'' if n == 1 else 's'}"


def live_rows(live_rows_: list[dict], intervals: dict[str, dict]) -> list[dict]:
    """The live point ratings, best first, with the latest refit's interval and rating beside each."""
    rows = []
    for rank, row in enumerate(live_rows_, start=1):
        refit = intervals.get(row["model"])
        rows.append(
            {
                "rank": rank, "model": row["model"], "rating": row["rating"], "battles": row["battles"],
                "refit_rating": None if refit is None else refit["rating"],
                "ci_low": None if refit is None else refit["ci_low"],
                "ci_high": None if refit is None else refit["ci_high"],
                "provisional": bool(refit and refit["provisional"]),
            }
        )  # fmt: skip
    return rows


_LIVE_TABLES: OrderedDict[tuple, str] = OrderedDict()


def arena_live_html(*, category: str, page: dict, now: datetime) -> str:
    """The live board above the refit's: point ratings refitted within a second of each vote, the
    refit's intervals beside them, and how old each is. The table is rendered once per live fit and
    refit; the ages are worked out per request. Nothing while the live fit has no ratings (too few votes):
    the board's status says that once."""
    stamp = rating_selectors.live_rating_stamp(category)
    if stamp is None:
        return ""
    key = (category, stamp["id"], stamp["fitted_at"], stamp["high_water"], page.get("refit_at"), page.get("filters"), page.get("catalogue"))
    with _LOCK:
        table = _LIVE_TABLES.get(key)
    if table == "":
        return ""
    if table is None:
        row = rating_selectors.live_rating(category)
        if row is None:
            return ""
        if not row.rows:  # too few votes for live ratings: the board's status says so, once
            with _LOCK:
                _LIVE_TABLES[key] = ""
            return ""
        shown = rows_public(row.rows, page.get("described", {}), page.get("filters", BoardFilters()))
        rows = live_rows(shown, page.get("intervals", {}))
        notes = notes_public(list(row.notes or []), page.get("described", {}))
        table = render_to_string("leaderboard/_arena_live_table.html", {"rows": rows, "notes": notes})
        with _LOCK:
            _LIVE_TABLES[key] = table
            while len(_LIVE_TABLES) > _RENDERED_SIZE:
                _LIVE_TABLES.popitem(last=False)
    refit_at = page.get("refit_at")
    context = {
        "table": mark_safe(table),
        "fitted_at": stamp["fitted_at"],
        "fitted_age": age((now - stamp["fitted_at"]).total_seconds()),
        "votes": f"{stamp['vote_count']:,}",
        "refit_at": refit_at,
        "refit_age": None if refit_at is None else age((now - refit_at).total_seconds()),
        "refit_votes": None if page.get("refit_votes") is None else f"{page['refit_votes']:,}",
    }
    return render_to_string("leaderboard/_arena_live.html", context)


__all__ = ["METHODS", "age", "arena_board", "arena_board_page", "arena_live_html", "before_after_rows", "category_label", "live_rows"]
