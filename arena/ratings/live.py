"""The live board: Bradley-Terry point ratings per category from pair counts kept current vote by vote.

A full refit (:func:`arena.ratings.refit.snapshots_refit`) reads every counted vote and bootstraps: its cost grows with
the votes. A point fit needs only the pair counts (~20k pairs at 200 models), so the live fit is

    counts = the last refit's counts (:class:`~arena.models.PairCountBase`, per category)
           + the counted votes with an id above that refit's high water, aggregated in SQL

(each process keeps the base plus the votes that have settled, :func:`settled_high_water`, as counts, so
a fit aggregates in SQL only the newest votes) and one :func:`evalcore.ratings.fit_bradley_terry` per
category (no bootstrap), written to
:class:`~arena.models.LiveRating`. The task ``arena.tasks.ratings_live`` runs it within a second of a
vote (see :func:`arena.play.dispatch.ratings_live_schedule`).

Agreement rule (docs/arena-ratings.md, "Live ratings"): right after a refit, the live counts are the
refit's counts exactly, so the live rating equals the refit's Bradley-Terry point rating. Votes after
it are added as they are counted (``Vote.counted``) at the time of the live fit. Decisions that change
votes the refit already read (a voter's votes set aside, an identity vote restored, a prompt becoming a
duplicate) reach the live counts at the next full refit, which replaces the base; so does a vote whose id
is below the refit's high water but that committed after the refit read the votes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db import connection, transaction

from arena.categories import selectors as selectors_categories
from arena.models import LanguageModel, LiveRating, PairCountBase, Vote
from arena.ratings.anchor import anchor_in_force, anchor_shift, rows_shifted
from arena.votes import selectors
from evalcore.ratings import Battles, PairCounts, aggregate, fit_bradley_terry

LONG_PROMPT_TOKENS = 500
FALLBACK_PRIOR = 0.01
TIES = "half"
OUTCOMES = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 3}
UNKNOWN_OUTCOME = 3  # a winner outside Vote.Winner (never written by the vote path): as the refit's read
CORE_CATEGORIES = ("overall", "multi_turn", "long_prompt", "no_ties")
SETTLE_S = 15  # a vote row commits within this long of its created_at (see settled_high_water)


@dataclass
class Tally:
    """Vote outcomes over global model indices: one entry per (a, b, outcome) group with its count."""

    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    n: np.ndarray

    @classmethod
    def empty(cls) -> Tally:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z.astype(np.float64))


def category_masks(turn_count, prompt_tokens, languages: dict[str, np.ndarray], outcome) -> dict[str, np.ndarray]:
    """Every category a vote belongs to, as the refit defines them, with every language in ``languages``
    (language -> mask, :func:`arena.votes.selectors.language_masks`; the refit shows a language once it has
    enough votes, the counts are kept from the first)."""
    n = len(turn_count)
    masks = {
        "overall": np.ones(n, dtype=bool),
        "multi_turn": np.asarray(turn_count) > 1,
        "long_prompt": np.asarray(prompt_tokens) >= LONG_PROMPT_TOKENS,
        "no_ties": np.asarray(outcome) < OUTCOMES["tie"],  # decided votes only (the view without ties)
    }
    for lang in sorted(languages):
        masks[f"language:{lang}"] = languages[lang]
    return masks


def pair_counts(names: tuple[str, ...], tally: Tally) -> PairCounts:
    """Pair counts over the models that played (sorted by name, as the refit orders them): evalcore's
    :func:`~evalcore.ratings.aggregate` of the tally (a dense table per pair while it is small, so 10M
    votes cost a few bincounts, not a sort)."""
    played = np.bincount(tally.a, minlength=len(names)) + np.bincount(tally.b, minlength=len(names))
    present = np.flatnonzero(played)
    position = np.full(len(names), -1, dtype=np.int32)
    position[present] = np.arange(present.size, dtype=np.int32)
    battles = Battles(tuple(names[k] for k in present), position[tally.a], position[tally.b], tally.outcome)
    return aggregate(battles, weights=tally.n)


def _tally_of(counts: PairCounts, index: dict[str, int]) -> Tally:
    """A stored category's counts as a tally over global model indices (one group per non-empty cell)."""
    g = np.array([index[name] for name in counts.models], dtype=np.int64)
    cells = counts.cells()
    pair, cell = np.nonzero(cells)
    return Tally(g[counts.i[pair]], g[counts.j[pair]], cell.astype(np.int64), cells[pair, cell])


def _join(*tallies: Tally) -> Tally:
    return Tally(*(np.concatenate([getattr(t, f) for t in tallies]) for f in ("a", "b", "outcome", "n")))


# --- The base: written by each full refit ---------------------------------------------------------


def base_store(
    votes, *, high_water: int, refit_at: datetime, known: dict[str, PairCounts] | None = None
) -> int:
    """Replace the stored base with the counts of ``votes`` (a refit's filtered
    :class:`arena.votes.selectors.VoteColumns`) per category; one transaction. Returns the categories stored.
    ``known``: categories' pair counts the refit already made from the same votes (the same counts)."""
    rows = []
    known = known or {}
    masks = category_masks(votes.turn_count, votes.prompt_tokens, votes.language_masks(), votes.outcome)
    for category, mask in selectors_categories.tag_masks(votes)[0].items():  # the tagged categories
        masks.setdefault(category, mask)
    for category, mask in masks.items():
        if not mask.any() and category not in CORE_CATEGORIES:
            continue
        counts = known.get(category)
        if counts is None:
            ones = np.ones(int(mask.sum()))
            counts = pair_counts(
                votes.names, Tally(votes.a[mask], votes.b[mask], votes.outcome[mask].astype(np.int64), ones)
            )
        cells = np.stack([counts.i, counts.j, *counts.cells().T.astype(np.int64)], axis=1)
        rows.append(
            PairCountBase(
                category=category,
                high_water=high_water,
                refit_at=refit_at,
                vote_count=int(mask.sum()),
                model_names=list(counts.models),
                cells=cells.astype(int).tolist(),
            )  # fmt: skip
        )
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Two refits writing at once (a lock that expired, a second scheduler) would both delete the
            # base and insert theirs: the second insert then breaks the unique category. One at a time,
            # until the enclosing transaction ends (SQLite writes one transaction at a time anyway).
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext('arena.live.base_store'))")
        PairCountBase.objects.all().delete()
        PairCountBase.objects.bulk_create(rows)
    return len(rows)


_BASE_CACHE: dict[tuple, PairCounts] = {}


def _base_counts(row: PairCountBase) -> PairCounts:
    """A stored base as pair counts; parsed once per process and refit."""
    key = (row.category, row.high_water, row.refit_at)
    if key not in _BASE_CACHE:
        if len(_BASE_CACHE) > 256:
            _BASE_CACHE.clear()
        cells = np.asarray(row.cells, dtype=np.float64).reshape(-1, 6)
        _BASE_CACHE[key] = PairCounts(
            tuple(row.model_names), cells[:, 0].astype(np.int32), cells[:, 1].astype(np.int32),
            cells[:, 2], cells[:, 3], cells[:, 4], cells[:, 5],
        )  # fmt: skip
    return _BASE_CACHE[key]


# --- The votes after it: aggregated in SQL ---------------------------------------------------------


def _delta_sql(bounded: bool) -> str:
    vote = Vote._meta
    q = connection.ops.quote_name

    def col(name: str) -> str:
        return q(vote.get_field(name).column)

    return (
        f"SELECT {col('model_a')}, {col('model_b')}, {col('winner')}, "
        f"CASE WHEN {col('turn_count')} > 1 THEN 1 ELSE 0 END, "
        f"CASE WHEN {col('prompt_tokens')} >= %s THEN 1 ELSE 0 END, {col('language')}, count(*), max({col('id')}) "
        f"FROM {q(vote.db_table)} WHERE {col('counted')} = %s AND {col('id')} > %s "
        + (f"AND {col('id')} <= %s " if bounded else "")
        + "GROUP BY 1, 2, 3, 4, 5, 6"
    )


_LANGUAGES: dict[str, int] = {}  # language -> code, per process


def delta_groups(after_id: int, upto: int | None = None) -> tuple[np.ndarray, int]:
    """Counted votes with ``after_id < id <= upto`` (no bound: every newer one), grouped in SQL, as rows of
    (model_a id, model_b id, outcome, multi_turn, long_prompt, language code, votes); and the largest id."""
    params = [LONG_PROMPT_TOKENS, True, after_id] + ([] if upto is None else [upto])
    with connection.cursor() as cursor:
        cursor.execute(_delta_sql(upto is not None), params)
        groups = cursor.fetchall()
    rows = [
        (g[0], g[1], OUTCOMES.get(g[2], UNKNOWN_OUTCOME), g[3], g[4], _LANGUAGES.setdefault(g[5] or "", len(_LANGUAGES)), g[6])
        for g in groups
    ]  # fmt: skip
    return np.array(rows, dtype=np.int64).reshape(-1, 7), max([after_id, *(int(g[7]) for g in groups)])


def settled_high_water() -> int:
    """A vote id at or below which every vote has committed (or never will), assuming a vote commits
    within :data:`SETTLE_S` of its ``created_at`` (the vote path: one statement, or one short transaction):
    the id of the newest vote created more than twice that long ago (0 when there is none)."""
    cutoff = datetime.now(UTC) - timedelta(seconds=2 * SETTLE_S)
    found = (
        Vote.objects.filter(created_at__lt=cutoff)
        .order_by("-created_at")
        .values_list("id", flat=True)
        .first()
    )
    return int(found or 0)


def _add(counts: dict, votes: dict, d: np.ndarray, name_of: dict[int, str]) -> tuple[dict, dict]:
    """``counts`` (category -> PairCounts or None) and ``votes`` (category -> votes) plus the grouped votes
    ``d`` (rows of :func:`delta_groups`), as new dicts; the inputs are left as they are."""
    ids = np.unique(d[:, :2])
    names = sorted(
        {n for c in counts.values() if c is not None for n in c.models} | {name_of[int(k)] for k in ids}
    )
    index = {name: k for k, name in enumerate(names)}
    lookup = np.full(int(ids.max()) + 1 if ids.size else 1, -1, dtype=np.int64)
    lookup[ids] = [index[name_of[int(k)]] for k in ids]
    a, b = lookup[d[:, 0]], lookup[d[:, 1]]
    languages = selectors.language_masks(d[:, 5], tuple(_LANGUAGES))  # codes in insertion order
    masks = category_masks(d[:, 3] + 1, np.where(d[:, 4] > 0, LONG_PROMPT_TOKENS, 0), languages, d[:, 2])
    out, total = {}, dict(votes)
    for category in sorted(set(masks) | set(counts) | set(CORE_CATEGORIES)):
        mask = masks.get(category)
        if mask is None or not mask.any():
            out[category] = counts.get(category)
            total.setdefault(category, 0)
            continue
        parts = [Tally(a[mask], b[mask], d[mask, 2], d[mask, 6].astype(np.float64))]
        if counts.get(category) is not None:
            parts.append(_tally_of(counts[category], index))
        total[category] = total.get(category, 0) + int(d[mask, 6].sum())
        out[category] = pair_counts(tuple(names), _join(*parts))
    return out, total


@dataclass
class _Settled:
    """Per process: the base plus the votes after it up to a settled id, as counts per category, so a live
    fit aggregates in SQL only the votes after that id, not every vote since the refit."""

    base: tuple
    upto: int
    high: int
    counts: dict
    votes: dict


_SETTLED: dict[str, _Settled] = {}


def _settled(bases: list[PairCountBase], name_of: dict[int, str]) -> _Settled:
    """This process's settled counts for the current base, brought up to the settled id."""
    base_hw = bases[0].high_water if bases else 0
    key = (base_hw, bases[0].refit_at if bases else None)
    state = _SETTLED.get("state")
    if state is not None and state.upto != base_hw and not Vote.objects.filter(id=state.upto).exists():
        state = None  # the votes it stood for are gone (a restored backup, a rolled-back test): start again
    if state is None or state.base != key:
        counts = {row.category: c if (c := _base_counts(row)).n_pairs else None for row in bases}
        state = _SETTLED["state"] = _Settled(
            key, base_hw, base_hw, counts, {r.category: r.vote_count for r in bases}
        )
    upto = settled_high_water()
    if upto > state.upto:
        rows, high = delta_groups(state.upto, upto)
        state.counts, state.votes = _add(state.counts, state.votes, rows, name_of)
        state.upto, state.high = upto, max(state.high, high)
    return state


@dataclass
class LiveCounts:
    counts: dict[str, PairCounts]
    votes: dict[str, int]
    high_water: int
    base_high_water: int
    base_refit_at: datetime | None


def live_counts() -> LiveCounts:
    """Base plus the votes after it, per category (see the module docstring)."""
    bases = list(PairCountBase.objects.defer("cells"))  # the cells load once per process and refit
    name_of = dict(LanguageModel.objects.values_list("id", "name"))
    state = _settled(bases, name_of)
    fresh, high = delta_groups(state.upto)
    counts, votes = _add(state.counts, state.votes, fresh, name_of)
    counts, votes = _with_tagged(counts, votes, state.base[0], name_of)
    return LiveCounts(counts, votes, max(state.high, high), state.base[0], state.base[1])


def _with_tagged(counts: dict, votes: dict, base_high_water: int, name_of: dict[int, str]) -> tuple[dict, dict]:
    """Each tagged category's base plus its tagged votes after the base. Read afresh at every fit, not
    settled once: a vote's tag arrives after the vote (the tagging queue), and counts from then on."""
    groups = selectors_categories.tagged_vote_groups(base_high_water, OUTCOMES, UNKNOWN_OUTCOME)
    counts, votes = dict(counts), dict(votes)
    for category, d in groups.items():
        base = counts.get(category)
        names = sorted({*(base.models if base is not None else ()), *(name_of[int(k)] for k in np.unique(d[:, :2]))})
        index = {name: k for k, name in enumerate(names)}
        a, b = (np.array([index[name_of[int(pk)]] for pk in d[:, side]], dtype=np.int64) for side in (0, 1))
        parts = [Tally(a, b, d[:, 2], d[:, 3].astype(np.float64))]
        if base is not None:
            parts.append(_tally_of(base, index))
        votes[category] = votes.get(category, 0) + int(d[:, 3].sum())
        counts[category] = pair_counts(tuple(names), _join(*parts)) if names else None
    return counts, votes


# --- The fit ----------------------------------------------------------------------------------------


def point_fit(counts: PairCounts) -> tuple[list[dict], list[str]]:
    """Bradley-Terry point ratings, best first; a non-finite MLE is refitted with the refit's prior."""
    notes = []
    try:
        result = fit_bradley_terry(counts, ties=TIES)
    except ValueError as exc:
        notes.append(f"{exc}; refitted with an L2 prior of {FALLBACK_PRIOR:g} (logit scale)")
        result = fit_bradley_terry(counts, ties=TIES, prior=FALLBACK_PRIOR)
    battles = counts.battles_per_model()
    rows = [
        {"model": result.models[k], "rating": float(result.ratings[k]), "battles": int(round(battles[k]))}
        for k in np.argsort(-result.ratings, kind="stable")
    ]
    return rows, notes


def live_refit(*, min_votes: int = 10, min_category_votes: int = 50) -> dict:
    """Fit every category's point ratings from the live counts and store them (one transaction)."""
    started = time.monotonic()
    live = live_counts()
    now = datetime.now(UTC)
    anchor = anchor_in_force()[0]  # a model not shown publicly is refused, as by the refit
    objects = []
    for category, counts in live.counts.items():
        n = live.votes.get(category, 0)
        needed = min_votes if category == "overall" else min_category_votes
        if counts is None or n < needed:
            rows, notes = [], [f"too few votes: {n} counted, ratings appear from {needed}"]
        else:
            rows, notes = point_fit(counts)
            shift = anchor_shift(rows, anchor)  # the refit's scale (arena.ratings.anchor)
            rows = rows if shift is None else rows_shifted(rows, shift)
        objects.append(
            LiveRating(
                category=category,
                fitted_at=now,
                fit_seconds=0.0,
                vote_count=n,
                high_water=live.high_water,
                base_high_water=live.base_high_water,
                base_refit_at=live.base_refit_at,
                rows=rows,
                notes=notes,
            )  # fmt: skip
        )
    seconds = round(time.monotonic() - started, 4)
    for obj in objects:
        obj.fit_seconds = seconds
    fields = ["fitted_at", "fit_seconds", "vote_count", "high_water", "base_high_water", "base_refit_at", "rows", "notes"]
    with transaction.atomic():
        LiveRating.objects.bulk_create(
            objects, update_conflicts=True, unique_fields=["category"], update_fields=fields
        )
        LiveRating.objects.exclude(category__in=[o.category for o in objects]).delete()
    return {"categories": len(objects), "votes": live.votes.get("overall", 0), "seconds": seconds}
