"""Rating snapshots from counted votes: Bradley-Terry, online Elo and style-controlled BT per category.

:func:`snapshots_refit` reads every counted vote once, fits each category and method with
:mod:`evalcore.ratings`, and writes all the :class:`~arena.models.RatingSnapshot` rows of one refit in a
single transaction, so a page never sees half a refit. This module holds the refit's entry points and
what touches the stored snapshots: the check that anything changed, the integrity record, the write and
the pruning (each model's points across refits, written in the same transaction, outlive it:
:mod:`arena.ratings.history`), and what the next refit continues from (the last Elo replays and style
fits). Which categories there are and how their fits are scheduled: :mod:`arena.ratings.draft`; the
methods, their intervals, costs, provisional models and the fallback prior: :mod:`arena.ratings.fits`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from datetime import UTC, datetime

import numpy as np
from django.db import transaction

from arena.categories import selectors as selectors_categories
from arena.models import RatingSnapshot
from arena.ratings import inputs as refit_read
from arena.ratings import live
from arena.ratings import selectors as rating_selectors
from arena.ratings.anchor import anchor_in_force, anchor_record, hidden_names
from arena.ratings.draft import category_battles, snapshots_draft
from arena.ratings.fits import STYLE_BUDGET, Draft, fit_bt
from arena.ratings.history import history_record, history_thin
from arena.votes import filters as vote_filters
from arena.votes import selectors
from evalcore.ratings import BASE_RATING, ELO_PER_LOGIT, STYLE_FEATURES, aggregate
from evalcore.ratings.provisional import DEFAULT_MIN_BATTLES

log = logging.getLogger(__name__)

KEEP_PER_KEY = 200  # snapshots kept per (method, category); older ones are pruned by each refit


def _clean(value):
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None (PostgreSQL jsonb has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":  # whole matrices at once, not per number
        cells = value.astype(object)
        cells[~np.isfinite(value)] = None
        return cells.tolist()
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def _when(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


def _latest_ids(method: str) -> dict[str, int]:
    """The newest snapshot's id per category for ``method`` (ids only: no JSON document is read)."""
    latest: dict[str, int] = {}
    for category, pk in (
        RatingSnapshot.objects.filter(method=method).order_by("-created_at", "-id").values_list("category", "id")
    ):  # fmt: skip
        latest.setdefault(category, pk)
    return latest


def elo_states_latest() -> dict[str, dict]:
    """The newest Elo snapshot's ``elo_state`` per category (what the next refit continues from)."""
    rows = RatingSnapshot.objects.filter(id__in=_latest_ids("elo").values()).values_list("category", "extra__elo_state")
    return {category: state for category, state in rows if isinstance(state, dict)}


def style_starts_latest() -> dict[str, tuple[dict[str, float], np.ndarray]]:
    """The newest style snapshot's fit per category as a start for the next one: strengths by model on
    the logit scale (from the ratings, centred as fitted) and the coefficients (the style features' order)."""
    starts: dict[str, tuple[dict[str, float], np.ndarray]] = {}
    for category, rows, coefficient_rows, shift in RatingSnapshot.objects.filter(
        id__in=_latest_ids("style").values()
    ).values_list("category", "rows", "extra__coefficients", "settings__anchor__shift"):
        if not isinstance(rows, list) or not isinstance(coefficient_rows, list):
            continue
        shift = shift if isinstance(shift, float | int) else 0.0  # the anchor moved the stored ratings by it
        coefficients = {c.get("coefficient"): c.get("estimate") for c in coefficient_rows if isinstance(c, dict)}
        beta = [coefficients.get(name) for name in STYLE_FEATURES]
        by_name = {r["model"]: (r["rating"] - shift - BASE_RATING) / ELO_PER_LOGIT for r in rows
                   if isinstance(r, dict) and isinstance(r.get("rating"), float) and math.isfinite(r["rating"])}  # fmt: skip
        if by_name and all(isinstance(b, float) and math.isfinite(b) for b in beta):
            starts[category] = (by_name, np.array(beta))
    return starts


_CONFIGURED = object()  # snapshots_compute's default anchor: the one in the settings


def snapshots_compute(
    params: dict, *, resume: bool = False, phases: dict | None = None, anchor=_CONFIGURED
) -> tuple[selectors.VoteColumns, list[Draft], dict]:
    """The counted votes (duplicate prompts counted once: :mod:`arena.votes.filters`), every snapshot fitted
    from them with ``params`` (the keyword arguments of :func:`~arena.ratings.draft.snapshots_draft` and
    ``duplicate_percentile``, as a refit records them in ``settings["refit"]``), and what the filters left
    out; nothing is written.
    ``resume``: Elo continues the last refit's replays where they match (a verification replays all);
    ``phases`` receives the seconds spent reading and fitting; ``anchor``: ``{"model", "rating"}`` or None
    (centred) instead of the settings' (a verification uses the one the snapshots recorded); the settings'
    anchor is refused, and the ratings centred, when its model is not shown publicly
    (:func:`arena.ratings.anchor.anchor_in_force`)."""
    params = dict(params)
    percentile = float(params.pop("duplicate_percentile", vote_filters.DUPLICATE_PERCENTILE))
    phases = {} if phases is None else phases
    mark = time.monotonic()
    states = elo_states_latest() if resume else None
    starts = style_starts_latest() if resume else None
    votes, integrity = refit_read.refit_votes_read(percentile)
    phases["read"] = time.monotonic() - mark
    mark = time.monotonic()
    tagged, made_by = selectors_categories.tag_masks(votes)
    refused = None
    if anchor is _CONFIGURED:
        anchor, refused = anchor_in_force()
        if refused is not None:
            log.warning(
                "ratings refit: the scale's anchor %s (ARENA_ANCHOR_MODEL) is not shown publicly; refused, the "
                "ratings are centred on a mean of 1000 (%s)", refused["model"], refused["reason"],
            )  # fmt: skip
    held = None if anchor is None else (anchor["model"], anchor["rating"])  # BT and style fit with it
    drafts = snapshots_draft(votes, **params, elo_states=states, style_starts=starts, tagged=tagged, anchor=held)
    for d in drafts:
        if d.category in made_by:  # the tagger and protocol version behind a tagged category
            d.settings["tags"] = made_by[d.category]
    drafts_anchor(drafts, anchor, refused)
    phases["fit"] = time.monotonic() - mark
    return votes, drafts, integrity


def anchors_latest() -> dict[tuple[str, str], dict]:
    """The newest snapshot's ``settings["anchor"]`` per (method, category); ``{"model": None}`` for one
    written before anchors were recorded (centred)."""
    ids = {pk: method for method in RatingSnapshot.Method.values for pk in _latest_ids(method).values()}
    rows = RatingSnapshot.objects.filter(id__in=ids).values_list("id", "category", "settings__anchor")
    return {(ids[pk], category): anchor if isinstance(anchor, dict) else {"model": None} for pk, category, anchor in rows}


def drafts_anchor(drafts: list[Draft], anchor: dict | None, refused: dict | None = None) -> None:
    """Put every snapshot on the anchored scale where it can be (:mod:`arena.ratings.anchor`), recording
    the anchor (and a change of it, or a refused one) in ``settings["anchor"]``; notes name no model that
    is not shown publicly."""
    previous = anchors_latest()
    hidden = hidden_names()
    for d in drafts:
        fitted = d.settings.pop("anchored_in_fit", False)
        d.rows, d.settings["anchor"], notes = anchor_record(
            d.rows, anchor, previous.get((d.method, d.category)), anchored_in_fit=fitted, refused=refused,
            hidden=hidden,
        )  # fmt: skip
        if d.rows and notes:
            d.extra["notes"] = list(d.extra.get("notes", [])) + notes


def _integrity_record(drafts: list[Draft], integrity: dict, *, rounds, seed, min_votes, percentile) -> None:
    """Every snapshot says what was left out; the overall BT one also holds the fit before confirmed
    anomalous voters' votes were set aside (``extra["before_voter_exclusion"]``), for the board."""
    note = vote_filters.integrity_note(integrity)
    for d in drafts:
        d.settings["integrity"] = integrity
        if note and d.category == "overall":
            d.extra.setdefault("notes", []).append(note)
    before = vote_filters.votes_before_voter_exclusion(percentile=percentile)
    overall = next((d for d in drafts if d.method == "bt" and d.category == "overall"), None)
    if before is None or overall is None or len(before) < min_votes:
        return
    draft = Draft("bt", "overall", len(before), None, None)
    draft.settings["provisional_votes"] = overall.settings["provisional_votes"]
    battles = category_battles(before, np.ones(len(before), dtype=bool))
    anchor = anchor_in_force()[0]
    anchor = None if anchor is None else (anchor["model"], anchor["rating"])
    fit_bt(battles, draft, rounds=rounds, seed=seed, counts=aggregate(battles), anchor=anchor)  # the board's scale
    rows = draft.rows
    overall.extra["before_voter_exclusion"] = {
        "vote_count": len(before), "rows": rows, "notes": draft.extra.get("notes", []),
    }  # fmt: skip


def _anchor_fingerprint() -> str:
    """The anchor in force (or refused) as part of the refit's fingerprint: a digest, since the
    fingerprint is in every snapshot's public settings and a refused anchor must not be named there."""
    return hashlib.sha256(repr(anchor_in_force()).encode()).hexdigest()[:16]


def snapshots_refit(
    *,
    rounds: int = 1000,
    seed: int = 0,
    elo_orders: int = 100,
    min_votes: int = 10,
    min_category_votes: int = 50,
    style_budget: int = STYLE_BUDGET,
    provisional_votes: int = DEFAULT_MIN_BATTLES,
    force: bool = False,
    duplicate_percentile: float = vote_filters.DUPLICATE_PERCENTILE,
) -> dict:
    """Refit every rating snapshot from the counted votes and write them in one transaction, with the
    live board's base (:func:`arena.ratings.live.base_store`). Returns ``written`` (snapshots), ``votes``,
    ``seconds``, ``skipped`` (True when nothing changed), ``phases`` (seconds per step).

    ``rounds``: bootstrap rounds for ``bt`` and ``style`` (production 1,000; tests pass fewer); ``seed``:
    of every fit (recorded in ``settings``); ``elo_orders``: random vote orders for Elo's order-dependence
    interval (0: none); ``min_votes``, ``min_category_votes``: votes needed before ``overall`` (resp. any
    other category) gets ratings; ``style_budget``: battle-rounds per category for the style bootstrap
    (see "Cost" in :mod:`arena.ratings.fits`); ``provisional_votes``: see "Provisional" there; ``force``:
    refit even when the counted votes have not changed; ``duplicate_percentile``: prompts sent more often
    than this percentile of prompt counts count once (:mod:`arena.votes.filters`; ``settings["integrity"]``
    and the notes say what was left out).
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if min_votes < 1 or min_category_votes < 1:
        raise ValueError("min_votes and min_category_votes must be at least 1")
    started = time.monotonic()
    fingerprint = f"{selectors.votes_counted_fingerprint()}:{rounds}:{seed}:{elo_orders}:{style_budget}:{provisional_votes}"
    fingerprint += f":{selectors_categories.tags_fingerprint()}"
    fingerprint += f":{duplicate_percentile:g}:{vote_filters.excluded_fingerprint()}:{_anchor_fingerprint()}"
    latest = rating_selectors.snapshot_latest("bt", "overall")
    if (
        not force
        and latest is not None
        and latest.settings.get("fingerprint") == fingerprint
        and refit_read.base_exists()
    ):
        return {"written": 0, "votes": latest.vote_count, "seconds": 0.0, "skipped": True}
    params = {
        "rounds": rounds, "seed": seed, "elo_orders": elo_orders, "min_votes": min_votes,
        "min_category_votes": min_category_votes, "style_budget": style_budget,
        "provisional_votes": provisional_votes, "duplicate_percentile": duplicate_percentile,
    }  # fmt: skip
    phases = {"check": time.monotonic() - started}
    votes, drafts, integrity = snapshots_compute(params, resume=True, phases=phases)
    high_water = integrity.pop("vote_high_water")  # the live board's base starts after it
    mark = time.monotonic()
    _integrity_record(
        drafts, integrity, rounds=rounds, seed=seed, min_votes=min_votes, percentile=duplicate_percentile
    )
    phases["integrity"] = time.monotonic() - mark
    mark = time.monotonic()
    objects = []
    for d in drafts:
        d.settings["fingerprint"] = fingerprint
        d.settings["refit"] = params
        d.settings["fit_seconds"] = round(time.monotonic() - started, 3)
        objects.append(
            RatingSnapshot(
                method=d.method,
                category=d.category,
                vote_count=d.vote_count,
                first_vote_at=_when(d.first),
                last_vote_at=_when(d.last),
                settings=_clean(d.settings),
                rows=_clean(d.rows),
                extra=_clean(d.extra),
            )  # fmt: skip
        )
    with transaction.atomic():
        # One INSERT each: bulk_create's UNNEST arrays escape every quote of the ~1 MB JSON documents in
        # Python (3.2 s for 27 snapshots at 200 models, 2.5 s this way).
        for obj in objects:
            obj.save(force_insert=True)
        known = {d.category: d.counts for d in drafts if d.counts is not None}
        refit_at = objects[0].created_at if objects else datetime.now(UTC)
        live.base_store(votes, high_water=high_water, refit_at=refit_at, known=known)
        for d in drafts:
            old = RatingSnapshot.objects.filter(method=d.method, category=d.category).order_by(
                "-created_at", "-id"
            )[KEEP_PER_KEY:]
            stale = list(old.values_list("id", flat=True))
            if stale:  # a snapshot a data release was built on is kept: the release names it (PROTECT)
                RatingSnapshot.objects.filter(id__in=stale, releases__isnull=True).delete()
        # Each model's points outlive the pruning (arena.ratings.history): written with their snapshots,
        # thinned where they aged past a week since the previous refit.
        history_record(objects)
        history_thin(now=refit_at, since=None if latest is None else latest.created_at)
    phases["write"] = time.monotonic() - mark
    return {
        "written": len(objects),
        "votes": len(votes),
        "seconds": round(time.monotonic() - started, 3),
        "skipped": False,
        "phases": {name: round(seconds, 2) for name, seconds in phases.items()},
    }
