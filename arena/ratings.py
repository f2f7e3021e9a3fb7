"""Rating snapshots from counted votes: Bradley-Terry, online Elo and style-controlled BT per category.

:func:`snapshots_refit` reads every counted vote once, fits each category and method with
:mod:`evalcore.ratings`, and writes all the :class:`~arena.models.RatingSnapshot` rows of one refit in a
single transaction, so a page never sees half a refit.

Categories
    ``overall``; ``language:<code>`` for each language with at least ``min_category_votes`` votes;
    ``multi_turn`` (the voter continued the conversation: ``turn_count > 1``); ``long_prompt`` (first
    prompt of at least :data:`LONG_PROMPT_TOKENS` tokens, LMArena's "longer query" threshold).
    ``overall``, ``multi_turn`` and ``long_prompt`` are always written, empty with a note while they have
    too few votes; a language appears once it has enough.

Methods
    ``bt``: Bradley-Terry MLE, ties count half, percentile bootstrap intervals (``rounds``, default
    1,000) and LMArena's conservative rank ``rank_ub``. ``elo``: online Elo (K=4) replayed in vote-time
    order, with the spread over ``elo_orders`` random vote orders as its interval (it measures order
    dependence, not sampling error; skipped above :data:`ELO_ORDERS_MAX_VOTES` votes, where it would cost
    about a minute per million votes). Elo is sequential by definition, so a refit continues the last
    refit's replay (``extra["elo_state"]``: its ratings after its votes, and a digest of those votes) when
    this refit's votes begin with exactly those votes, in the same order: bit for bit the full replay,
    for the cost of the new votes (``settings["resumed_after"]`` says how many were not replayed).
    ``style``: BT with style covariates (answer length, headers, list items, bold), bootstrap intervals,
    and the coefficient table in ``extra["coefficients"]``.

Cost
    BT's bootstrap resamples pair counts (Poisson): 1,000 rounds cost the same at any vote count (~1.4 s
    of one core at 200 models, docs/PERFORMANCE.md). The
    style bootstrap refits over every battle each round, so its rounds are capped by ``style_budget``
    battle-rounds per category (:data:`STYLE_BUDGET`); ``settings`` and ``notes`` record what ran.

Provisional
    Fewer than ``provisional_votes`` votes in a category (default 300), or all wins or all losses there:
    exact binomial bounds against rated opponents, no rank 1, not counted in others' ranks.

A fit with no finite MLE (a disconnected graph, a model that won or lost every game, or too many dropped
bootstrap rounds) is redone with a small L2 prior (:data:`FALLBACK_PRIOR`) and a note. Each fit seeds
``np.random.default_rng(seed)`` afresh: ``python -m evalcore rate`` on a category's exported votes
with the same method, seed and rounds reproduces its snapshot.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import numpy as np
from django.db import transaction

from arena import live, selectors, vote_filters
from arena.live import LONG_PROMPT_TOKENS
from arena.models import RatingSnapshot
from common.forkjobs import run_forked
from evalcore.ratings import (
    BASE_RATING,
    ELO_PER_LOGIT,
    STYLE_FEATURES,
    Battles,
    PairCounts,
    RatingResult,
    aggregate,
    bootstrap_bradley_terry,
    fit_style_controlled,
    online_elo,
    predicted_win_matrix,
    win_matrix,
)
from evalcore.ratings.provisional import DEFAULT_MIN_BATTLES, mark_provisional

FALLBACK_PRIOR = 0.01
TIES = "half"
ELO_K = 4.0
ELO_INITIAL = 1000.0
LEVEL = 0.95
KEEP_PER_KEY = 200  # snapshots kept per (method, category); older ones are pruned by each refit
DROPPED_ROUNDS_TOLERANCE = 0.01  # more dropped bootstrap rounds than this share: refit with the prior
STYLE_BUDGET = 1_500_000  # battle-rounds per category for the style bootstrap
STYLE_MIN_ROUNDS = 100
ELO_ORDERS_MAX_VOTES = 100_000
FIT_WORKERS = min(4, os.cpu_count() or 1)  # fits run side by side in forked processes (common.forkjobs)


@dataclass
class _Draft:
    method: str
    category: str
    vote_count: int
    first: float | None
    last: float | None
    rows: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    counts: PairCounts | None = None  # the category's pair counts (not stored: the live base reuses them)


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


def _rows(result: RatingResult) -> list[dict]:
    """The CLI's rows plus rank intervals and which models are statistically tied (intervals overlap)."""
    rows = result.to_rows()
    index = {name: k for k, name in enumerate(result.models)}
    lo, hi = result.ci_low, result.ci_high
    for pos, row in enumerate(rows):
        k = index[row["model"]]
        overlap = (lo <= hi[k]) & (lo[k] <= hi)
        overlap[k] = False
        row["tied_with"] = [result.models[j] for j in np.flatnonzero(overlap)]
        above = rows[pos - 1]["model"] if pos else None
        row["tied_with_above"] = above is not None and above in row["tied_with"]
        if result.rank_ci_low is not None and result.rank_ci_high is not None:
            row["rank_ci"] = [int(result.rank_ci_low[k]), int(result.rank_ci_high[k])]
    return rows


def _matrices(counts: PairCounts, result: RatingResult) -> dict:
    """Observed win rates and counts, and predicted win probabilities, best-first model order."""
    order = result.order()
    observed = win_matrix(counts, ties=TIES)
    pick = np.ix_(order, order)
    return {
        "models": [result.models[k] for k in order],
        "win_rate": np.round(observed.win_rate[pick], 4),
        "battles": np.round(observed.battles[pick], 2),
        "predicted": np.round(predicted_win_matrix(result)[pick], 4),
    }


def _needs_prior(result: RatingResult, rounds: int) -> bool:
    return result.interval == "bootstrap" and result.bootstrap_rounds < rounds * (
        1 - DROPPED_ROUNDS_TOLERANCE
    )


def _with_fallback(fit, rounds: int) -> tuple[object, list[str]]:
    """Run ``fit(prior)`` without a prior; on a non-finite MLE (or many dropped rounds) use the fallback."""
    try:
        out = fit(None)
        result = out if isinstance(out, RatingResult) else out.ratings
        if not _needs_prior(result, rounds):
            return out, []
        reason = f"{rounds - result.bootstrap_rounds} of {rounds} bootstrap rounds had no finite MLE"
    except ValueError as exc:
        reason = str(exc)
    note = f"{reason}; refitted with an L2 prior of {FALLBACK_PRIOR:g} (logit scale)"
    return fit(FALLBACK_PRIOR), [note]


def _fit_bt(battles: Battles, draft: _Draft, *, rounds: int, seed: int, counts: PairCounts) -> None:
    def fit(prior):
        return bootstrap_bradley_terry(
            counts, rounds=rounds, rng=np.random.default_rng(seed), ties=TIES, prior=prior, level=LEVEL,
            keep_samples=False,
        )  # fmt: skip

    result, notes = _with_fallback(fit, rounds)
    _fill(draft, counts, result, notes)


def style_rounds(n: int, rounds: int, budget: int) -> int:
    """Bootstrap rounds for a style fit over ``n`` battles within ``budget`` battle-rounds (0: sandwich)."""
    if n * rounds <= budget:
        return rounds
    affordable = budget // max(n, 1)
    return affordable if affordable >= STYLE_MIN_ROUNDS else 0


def _fit_style(
    battles: Battles, draft: _Draft, *, rounds: int, seed: int, budget: int, counts: PairCounts, start=None
) -> None:
    used = style_rounds(len(battles), rounds, budget)

    def fit(prior):
        return fit_style_controlled(
            battles, ties=TIES, prior=prior, rounds=used, rng=np.random.default_rng(seed), level=LEVEL,
            counts=counts, start=start,
        )  # fmt: skip

    style, notes = _with_fallback(fit, used)
    draft.settings["newton_start"] = "last refit" if start is not None else "plain BT"
    if used != rounds:
        notes.append(
            f"style intervals: {f'{used} bootstrap rounds' if used else 'sandwich (robust) standard errors'} "
            f"instead of {rounds}, to keep the refit within {budget:,} battle-rounds"
        )
    _fill(draft, counts, style.ratings, notes)
    draft.extra["coefficients"] = style.coefficient_rows()
    draft.extra["feature_mean"] = style.feature_mean
    draft.extra["feature_std"] = style.feature_std


ELO_STATE_VERSION = 1
_DIGEST_BLOCK = 1 << 20
_BATTLE_RECORD = np.dtype([("a", "<u8"), ("b", "<u8"), ("outcome", "i1")])  # 17 bytes, packed


def _elo_digest(battles: Battles, lo: int, hi: int, digest) -> None:
    """Feed battles ``lo:hi`` to ``digest`` as 17-byte records (64-bit hashes of both models' names and
    the outcome): the same bytes whatever the block boundaries, so a prefix's digest continues."""
    names = np.array(
        [
            int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
            for name in battles.models
        ],
        dtype=np.uint64,
    )
    for start in range(lo, hi, _DIGEST_BLOCK):
        stop = min(hi, start + _DIGEST_BLOCK)
        record = np.empty(stop - start, dtype=_BATTLE_RECORD)
        record["a"] = names[battles.model_a[start:stop]]
        record["b"] = names[battles.model_b[start:stop]]
        record["outcome"] = battles.outcome[start:stop]
        digest.update(record.tobytes())


def _elo_resume(battles: Battles, state: dict | None, orders: int):
    """``(skip, start ratings, digest of the first skip battles)`` when ``state`` (an earlier refit's
    ``elo_state``) replayed exactly this category's first battles in this order, else ``(0, None, fresh)``."""
    fresh = hashlib.sha256()
    usable = (
        orders == 0 and isinstance(state, dict) and state.get("version") == ELO_STATE_VERSION
        and state.get("k") == ELO_K and state.get("ties") == TIES and isinstance(state.get("ratings"), dict)
        and isinstance(state.get("votes"), int) and 0 < state["votes"] <= len(battles)
        and battles.tstamp is not None and bool(np.all(battles.tstamp[1:] >= battles.tstamp[:-1]))
    )  # fmt: skip
    if not usable:
        return 0, None, fresh
    skip = state["votes"]
    digest = hashlib.sha256()
    _elo_digest(battles, 0, skip, digest)
    if digest.hexdigest() != state.get("digest"):
        return 0, None, fresh
    try:
        start = np.array([float(state["ratings"].get(name, ELO_INITIAL)) for name in battles.models])
    except (TypeError, ValueError):
        return 0, None, fresh
    if not np.all(np.isfinite(start)):
        return 0, None, fresh
    return skip, start, digest


def _fit_elo(
    battles: Battles, draft: _Draft, *, orders: int, seed: int, state: dict | None, counts: PairCounts
) -> None:
    orders = orders if len(battles) <= ELO_ORDERS_MAX_VOTES else 0
    skip, start, digest = _elo_resume(battles, state, orders)
    result = online_elo(
        battles, k=ELO_K, ties=TIES, permutations=orders, rng=np.random.default_rng(seed), level=LEVEL,
        initial=ELO_INITIAL, start=start, skip=skip,
    )  # fmt: skip
    _fill(draft, counts, result, [])
    draft.settings["k"] = ELO_K
    draft.settings["orders"] = orders
    draft.settings["resumed_after"] = skip
    _elo_digest(battles, skip, len(battles), digest)
    draft.extra["elo_state"] = {
        "version": ELO_STATE_VERSION, "k": ELO_K, "ties": TIES, "votes": len(battles),
        "digest": digest.hexdigest(), "ratings": dict(zip(battles.models, result.ratings.tolist())),
    }  # fmt: skip


def _fill(draft: _Draft, counts: PairCounts, result: RatingResult, notes: list[str]) -> None:
    result = mark_provisional(result, counts, min_battles=draft.settings["provisional_votes"])
    draft.rows = _rows(result)
    draft.extra.update(_matrices(counts, result))
    draft.extra["notes"] = notes + list(result.notes)
    draft.settings.update(
        ties=result.ties, prior=result.prior, interval=result.interval, level=result.level,
        bootstrap_rounds=result.bootstrap_rounds,
    )  # fmt: skip


def _categories(votes: selectors.VoteColumns, min_category_votes: int) -> dict[str, np.ndarray]:
    n = len(votes)
    masks = {
        "overall": np.ones(n, dtype=bool),
        "multi_turn": votes.turn_count > 1,
        "long_prompt": votes.prompt_tokens >= LONG_PROMPT_TOKENS,
    }
    for lang, mask in votes.language_masks().items():
        if int(mask.sum()) >= min_category_votes:
            masks[f"language:{lang}"] = mask
    return masks


def _battles(votes: selectors.VoteColumns, mask: np.ndarray) -> Battles:
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
) -> list[_Draft]:
    """Fit every category and method; nothing is written. See the module docstring. ``elo_states``: the
    last refit's ``elo_state`` per category, for Elo to continue from where it matches; ``style_starts``:
    the last refit's style fit per category (:func:`style_starts_latest`), where the style fit's Newton
    iterations start (the same optimum, two or three curvature passes over the battles fewer)."""
    drafts: list[_Draft] = []
    jobs: list[tuple[float, list[int], partial]] = []  # (estimated seconds, indices in drafts, the fits)
    for category, mask in _categories(votes, min_category_votes).items():
        n = int(mask.sum())
        ts = votes.tstamp[mask]
        first, last = (float(ts.min()), float(ts.max())) if n else (None, None)
        needed = min_votes if category == "overall" else min_category_votes
        for method in RatingSnapshot.Method.values:
            draft = _Draft(method, category, n, first, last)
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
                fits.append(partial(_fit_bt, rounds=rounds, seed=seed))
                cost += 1.5 * rounds / 1000
            elif draft.method == "style":
                start = (style_starts or {}).get(category)
                fits.append(partial(_fit_style, rounds=rounds, seed=seed, budget=style_budget, start=start))
                cost += 4e-7 * n * max(1, style_rounds(n, rounds, style_budget))
            else:
                fits.append(partial(_fit_elo, orders=elo_orders, seed=seed, state=state))
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
    votes: selectors.VoteColumns, mask: np.ndarray, fits: list, drafts: list[_Draft]
) -> list[_Draft]:
    """Run one category's fits (each fills its draft) on its battles and pair counts."""
    battles = _battles(votes, mask)
    counts = aggregate(battles)
    for fit, draft in zip(fits, drafts):
        fit(battles, draft, counts=counts)
    drafts[0].counts = counts
    return drafts


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
    for category, rows, coefficient_rows in RatingSnapshot.objects.filter(
        id__in=_latest_ids("style").values()
    ).values_list("category", "rows", "extra__coefficients"):
        if not isinstance(rows, list) or not isinstance(coefficient_rows, list):
            continue
        coefficients = {c.get("coefficient"): c.get("estimate") for c in coefficient_rows if isinstance(c, dict)}
        beta = [coefficients.get(name) for name in STYLE_FEATURES]
        by_name = {r["model"]: (r["rating"] - BASE_RATING) / ELO_PER_LOGIT for r in rows
                   if isinstance(r, dict) and isinstance(r.get("rating"), float) and math.isfinite(r["rating"])}  # fmt: skip
        if by_name and all(isinstance(b, float) and math.isfinite(b) for b in beta):
            starts[category] = (by_name, np.array(beta))
    return starts


def snapshots_compute(
    params: dict, *, resume: bool = False, phases: dict | None = None
) -> tuple[selectors.VoteColumns, list[_Draft], dict]:
    """The counted votes (duplicate prompts counted once: :mod:`arena.vote_filters`), every snapshot fitted
    from them with ``params`` (the keyword arguments of :func:`snapshots_draft` and ``duplicate_percentile``,
    as a refit records them in ``settings["refit"]``), and what the filters left out; nothing is written.
    ``resume``: Elo continues the last refit's replays where they match (a verification replays all);
    ``phases`` receives the seconds spent reading and fitting."""
    params = dict(params)
    percentile = float(params.pop("duplicate_percentile", vote_filters.DUPLICATE_PERCENTILE))
    phases = {} if phases is None else phases
    mark = time.monotonic()
    states = elo_states_latest() if resume else None
    starts = style_starts_latest() if resume else None
    votes, integrity = live.refit_votes_read(percentile)
    phases["read"] = time.monotonic() - mark
    mark = time.monotonic()
    drafts = snapshots_draft(votes, **params, elo_states=states, style_starts=starts)
    phases["fit"] = time.monotonic() - mark
    return votes, drafts, integrity


def _integrity_record(drafts: list[_Draft], integrity: dict, *, rounds, seed, min_votes, percentile) -> None:
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
    draft = _Draft("bt", "overall", len(before), None, None)
    draft.settings["provisional_votes"] = overall.settings["provisional_votes"]
    battles = _battles(before, np.ones(len(before), dtype=bool))
    _fit_bt(battles, draft, rounds=rounds, seed=seed, counts=aggregate(battles))
    overall.extra["before_voter_exclusion"] = {
        "vote_count": len(before), "rows": draft.rows, "notes": draft.extra.get("notes", []),
    }  # fmt: skip


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
    live board's base (:func:`arena.live.base_store`). Returns ``written`` (snapshots), ``votes``,
    ``seconds``, ``skipped`` (True when nothing changed), ``phases`` (seconds per step).

    ``rounds``: bootstrap rounds for ``bt`` and ``style`` (production 1,000; tests pass fewer); ``seed``:
    of every fit (recorded in ``settings``); ``elo_orders``: random vote orders for Elo's order-dependence
    interval (0: none); ``min_votes``, ``min_category_votes``: votes needed before ``overall`` (resp. any
    other category) gets ratings; ``style_budget``: battle-rounds per category for the style bootstrap
    (see "Cost"); ``provisional_votes``: see "Provisional"; ``force``: refit even when the counted votes
    have not changed; ``duplicate_percentile``: prompts sent more often than this percentile of prompt
    counts count once (:mod:`arena.vote_filters`; ``settings["integrity"]`` and the notes say what was
    left out).
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if min_votes < 1 or min_category_votes < 1:
        raise ValueError("min_votes and min_category_votes must be at least 1")
    started = time.monotonic()
    fingerprint = f"{selectors.votes_counted_fingerprint()}:{rounds}:{seed}:{elo_orders}:{style_budget}:{provisional_votes}"
    fingerprint += f":{duplicate_percentile:g}:{vote_filters.excluded_fingerprint()}"
    latest = selectors.snapshot_latest("bt", "overall")
    if (
        not force
        and latest is not None
        and latest.settings.get("fingerprint") == fingerprint
        and live.base_exists()
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
        live.base_store(
            votes, high_water=high_water, refit_at=objects[0].created_at or datetime.now(UTC), known=known
        )
        for d in drafts:
            old = RatingSnapshot.objects.filter(method=d.method, category=d.category).order_by(
                "-created_at", "-id"
            )[KEEP_PER_KEY:]
            stale = list(old.values_list("id", flat=True))
            if stale:
                RatingSnapshot.objects.filter(id__in=stale).delete()
    phases["write"] = time.monotonic() - mark
    return {
        "written": len(objects),
        "votes": len(votes),
        "seconds": round(time.monotonic() - started, 3),
        "skipped": False,
        "phases": {name: round(seconds, 2) for name, seconds in phases.items()},
    }
