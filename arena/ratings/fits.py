"""One category's fits, one per method, each filling a :class:`Draft` of a rating snapshot.

The refit (:mod:`arena.ratings.refit`) makes each category's battles and pair counts (:mod:`arena.ratings.draft`)
and calls :func:`fit_bt`, :func:`fit_style` and :func:`fit_elo` on them; this module holds what decides
the numbers: the methods' settings, the fallback prior, Elo's resumable replay, and the rows and matrices
a snapshot stores.

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
from dataclasses import dataclass, field

import numpy as np

from evalcore.ratings import (
    Battles,
    PairCounts,
    RatingResult,
    bootstrap_bradley_terry,
    fit_style_controlled,
    online_elo,
    predicted_win_matrix,
    win_matrix,
)
from evalcore.ratings.provisional import mark_provisional

FALLBACK_PRIOR = 0.01
TIES = "half"
ELO_K = 4.0
ELO_INITIAL = 1000.0
LEVEL = 0.95
DROPPED_ROUNDS_TOLERANCE = 0.01  # more dropped bootstrap rounds than this share: refit with the prior
STYLE_BUDGET = 1_500_000  # battle-rounds per category for the style bootstrap
STYLE_MIN_ROUNDS = 100
ELO_ORDERS_MAX_VOTES = 100_000


@dataclass
class Draft:
    """One snapshot being made: what a :class:`~arena.models.RatingSnapshot` will store."""

    method: str
    category: str
    vote_count: int
    first: float | None
    last: float | None
    rows: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    counts: PairCounts | None = None  # the category's pair counts (not stored: the live base reuses them)


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


def _anchor_in(anchor: tuple[str, float] | None, models, draft: Draft) -> tuple[str, float] | None:
    """The anchor to fit with (every bootstrap round held at it, as LMArena does), or None while the
    anchor model has no votes here (arena.ratings.anchor then records the centring)."""
    if anchor is None or anchor[0] not in models:
        return None
    draft.settings["anchored_in_fit"] = True
    return anchor


def fit_bt(
    battles: Battles, draft: Draft, *, rounds: int, seed: int, counts: PairCounts, anchor: tuple | None = None
) -> None:
    """Bradley-Terry with percentile bootstrap intervals into ``draft`` (method ``bt``); ``anchor``:
    ``(model, rating)`` to hold fixed in the point fit and every round."""
    anchor = _anchor_in(anchor, counts.models, draft)

    def fit(prior):
        return bootstrap_bradley_terry(
            counts, rounds=rounds, rng=np.random.default_rng(seed), ties=TIES, prior=prior, level=LEVEL,
            keep_samples=False, anchor=anchor,
        )  # fmt: skip

    result, notes = _with_fallback(fit, rounds)
    _fill(draft, counts, result, notes)


def style_rounds(n: int, rounds: int, budget: int) -> int:
    """Bootstrap rounds for a style fit over ``n`` battles within ``budget`` battle-rounds (0: sandwich)."""
    if n * rounds <= budget:
        return rounds
    affordable = budget // max(n, 1)
    return affordable if affordable >= STYLE_MIN_ROUNDS else 0


def fit_style(
    battles: Battles, draft: Draft, *, rounds: int, seed: int, budget: int, counts: PairCounts, start=None,
    anchor: tuple | None = None,
) -> None:
    """Style-controlled BT into ``draft`` (method ``style``), Newton's method from ``start`` if given;
    ``anchor`` as for :func:`fit_bt`."""
    used = style_rounds(len(battles), rounds, budget)
    anchor = _anchor_in(anchor, battles.models, draft)

    def fit(prior):
        return fit_style_controlled(
            battles, ties=TIES, prior=prior, rounds=used, rng=np.random.default_rng(seed), level=LEVEL,
            counts=counts, start=start, anchor=anchor,
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


def fit_elo(
    battles: Battles, draft: Draft, *, orders: int, seed: int, state: dict | None, counts: PairCounts
) -> None:
    """Online Elo into ``draft`` (method ``elo``), continuing ``state`` (the last refit's) if it matches."""
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


def _fill(draft: Draft, counts: PairCounts, result: RatingResult, notes: list[str]) -> None:
    result = mark_provisional(result, counts, min_battles=draft.settings["provisional_votes"])
    draft.rows = _rows(result)
    draft.extra.update(_matrices(counts, result))
    draft.extra["notes"] = notes + list(result.notes)
    draft.settings.update(
        ties=result.ties, prior=result.prior, interval=result.interval, level=result.level,
        bootstrap_rounds=result.bootstrap_rounds,
    )  # fmt: skip
