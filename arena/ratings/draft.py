"""The refit's categories and its plan: which votes each category holds, and its fits run side by side.

:func:`snapshots_draft` splits the counted votes into categories, makes one job per category (its
battles and pair counts, then one fit per method: :mod:`arena.ratings.fits`) and runs the jobs in forked
processes, costliest first; nothing is written (:mod:`arena.ratings.refit` writes).

Categories
    ``overall``; ``language:<code>`` for each language with at least ``min_category_votes`` votes;
    ``multi_turn`` (the voter continued the conversation: ``turn_count > 1``); ``long_prompt`` (first
    prompt of at least :data:`LONG_PROMPT_TOKENS` tokens, LMArena's "longer query" threshold); ``no_ties``
    (every vote but ties and both-bad votes: LMArena's view "without ties").
    ``overall``, ``multi_turn``, ``long_prompt`` and ``no_ties`` are always written, empty with a note while
    they have too few votes; a language appears once it has enough. Tagged categories (``hard_prompt``,
    ``coding``, ...: votes whose first prompt a tagger model put there, docs/categories.md) appear the same way.
"""

from __future__ import annotations

import os
from functools import partial

import numpy as np

from arena.models import RatingSnapshot
from arena.ratings.fits import (
    ELO_ORDERS_MAX_VOTES,
    STYLE_BUDGET,
    Draft,
    fit_bt,
    fit_elo,
    fit_style,
    style_rounds,
)
from arena.ratings.live import LONG_PROMPT_TOKENS
from arena.votes import selectors
from common.forkjobs import run_forked
from evalcore.ratings import Battles, aggregate
from evalcore.ratings.provisional import DEFAULT_MIN_BATTLES

TIE_CODE = 2  # evalcore's outcome codes: 0 model_a won, 1 model_b won, 2 tie, 3 tie (both bad)
FIT_WORKERS = min(4, os.cpu_count() or 1)  # fits run side by side in forked processes (common.forkjobs)


def categories_of(
    votes: selectors.VoteColumns, min_category_votes: int, tagged: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Each category's votes as a mask over ``votes`` (see the module docstring); ``tagged``: the tagged
    categories' masks (:func:`arena.categories.selectors.tag_masks`), each kept once it has enough votes."""
    n = len(votes)
    masks = {
        "overall": np.ones(n, dtype=bool),
        "multi_turn": votes.turn_count > 1,
        "long_prompt": votes.prompt_tokens >= LONG_PROMPT_TOKENS,
        "no_ties": votes.outcome < TIE_CODE,  # the board's view without ties: tie and both-bad votes left out
    }
    for lang, mask in votes.language_masks().items():
        if int(mask.sum()) >= min_category_votes:
            masks[f"language:{lang}"] = mask
    for category, mask in (tagged or {}).items():
        if category not in masks and int(mask.sum()) >= min_category_votes:
            masks[category] = mask
    return masks


def category_battles(votes: selectors.VoteColumns, mask: np.ndarray) -> Battles:
    """The votes in ``mask`` as evalcore battles over the models that played them (sorted by name, as
    :func:`evalcore.ratings.battles_from_arrays` orders them), without a Python object per vote. Where
    the mask takes every vote (``overall``) the columns are used as they are, not copied (at 10M votes
    that is 0.8 GB of fresh pages less)."""
    idx = slice(None) if mask.all() else np.flatnonzero(mask)
    a, b = votes.a[idx], votes.b[idx]
    present = np.flatnonzero(np.bincount(a, minlength=len(votes.names)) + np.bincount(b, minlength=len(votes.names)))
    if present.size == len(votes.names):
        a_code, b_code = a, b
    else:
        position = np.full(len(votes.names), -1, dtype=np.int32)
        position[present] = np.arange(present.size, dtype=np.int32)
        a_code, b_code = position[a], position[b]
    columns = [a_code, b_code, votes.outcome[idx], votes.tstamp[idx], votes.style_a[idx], votes.style_b[idx]]
    if isinstance(idx, slice):  # views of the votes' own columns: no fit may write into them
        columns = [column.view() for column in columns]
        for column in columns:
            column.flags.writeable = False
    return Battles(tuple(votes.names[k] for k in present), *columns)


def snapshots_draft(
    votes: selectors.VoteColumns,
    *,
    rounds: int = 1000,
    seed: int = 0,
    elo_orders: int = 100,
    min_votes: int = 10,
    min_category_votes: int = 50,
    style_budget: int = STYLE_BUDGET,
    provisional_votes: int = DEFAULT_MIN_BATTLES,
    elo_states: dict[str, dict] | None = None,
    style_starts: dict[str, tuple] | None = None,
    tagged: dict[str, np.ndarray] | None = None,
    anchor: tuple[str, float] | None = None,
) -> list[Draft]:
    """Fit every category and method; nothing is written. See the module docstring. ``elo_states``: the
    last refit's ``elo_state`` per category, for Elo to continue from where it matches; ``style_starts``:
    the last refit's style fit per category (:func:`arena.ratings.refit.style_starts_latest`), where the style
    fit's Newton iterations start (the same optimum, two or three curvature passes over the battles fewer)."""
    drafts: list[Draft] = []
    jobs: list[tuple[float, list[int], partial]] = []  # (estimated seconds, indices in drafts, the fits)
    for category, mask in categories_of(votes, min_category_votes, tagged).items():
        n = int(mask.sum())
        ts = votes.tstamp[mask]
        first, last = (float(ts.min()), float(ts.max())) if n else (None, None)
        needed = min_votes if category == "overall" else min_category_votes
        for method in RatingSnapshot.Method.values:
            draft = Draft(method, category, n, first, last)
            draft.settings.update(
                seed=seed, rounds=rounds, min_votes=needed, provisional_votes=provisional_votes
            )
            if category == "long_prompt":
                draft.settings["long_prompt_tokens"] = LONG_PROMPT_TOKENS
            drafts.append(draft)
        if n < needed:
            for draft in drafts[-3:]:
                draft.extra["notes"] = [f"too few votes: {n} counted, ratings appear from {needed}"]
            continue
        state = (elo_states or {}).get(category)
        fits, cost = [], 0.0
        for draft in drafts[-3:]:
            if draft.method == "bt":
                fits.append(partial(fit_bt, rounds=rounds, seed=seed, anchor=anchor))
                cost += 1.5 * rounds / 1000
            elif draft.method == "style":
                start = (style_starts or {}).get(category)
                fits.append(partial(fit_style, rounds=rounds, seed=seed, budget=style_budget, start=start, anchor=anchor))
                cost += 4e-7 * n * max(1, style_rounds(n, rounds, style_budget))
            else:
                fits.append(partial(fit_elo, orders=elo_orders, seed=seed, state=state))
                done = (
                    state.get("votes")
                    if isinstance(state, dict) and isinstance(state.get("votes"), int)
                    else 0
                )
                cost += 3e-7 * max(n - done, 0) + (1e-6 * n * elo_orders if n <= ELO_ORDERS_MAX_VOTES else 0)
        indices = list(range(len(drafts) - 3, len(drafts)))
        jobs.append((cost, indices, partial(_category_fits, votes, mask, fits, drafts[-3:])))
    # One job per category (its battles and pair counts made once, in the job), costliest first, in
    # forked processes: each fit seeds its own generator, so where it runs changes no number, and
    # processes (not threads: Elo's replay and the fits' small numpy calls hold the GIL) use every core.
    jobs.sort(key=lambda job: -job[0])
    for (_, indices, _), fitted in zip(jobs, run_forked([job for _, _, job in jobs], workers=FIT_WORKERS)):
        for index, draft in zip(indices, fitted):
            drafts[index] = draft
    return drafts


def _category_fits(
    votes: selectors.VoteColumns, mask: np.ndarray, fits: list, drafts: list[Draft]
) -> list[Draft]:
    """Run one category's fits (each fills its draft) on its battles and pair counts."""
    battles = category_battles(votes, mask)
    counts = aggregate(battles)
    for fit, draft in zip(fits, drafts):
        fit(battles, draft, counts=counts)
    drafts[0].counts = counts
    return drafts
