"""Judge panels: several judges score the same answers; one panel score, and how far each judge agrees.

Graded answers (:func:`panel_grades`): the panel score is the mean over judges of each judge's
*standardised* scores. Each judge's grades are turned into z-scores over everything that judge graded
(``(score - judge mean) / judge sd``, population sd) before they are averaged: judges use the 1-10 scale
differently (one gives 7-9 to everything, another spreads 1-10), and averaging raw scores would let the
widest-ranging judge decide the panel's order and shift the panel by a lenient judge's offset. After
standardising every judge weighs the same. A judge that gives one score to everything carries no
ranking information: its z-scores are 0 (a note says so).

Pairwise judgments (:func:`panel_pairwise`): the panel is one Bradley-Terry fit over every judge's
judgments pooled. Each judgment is a vote; pooling weighs a judge by how many judgments it made, so a
judge that saw more pairs counts more, and every judge's votes inform every rating (a model compared by
only one judge still gets a rating). The alternative, a per-judge fit averaged over judges, weighs judges
equally but needs every judge to see every model and breaks on a judge whose votes cannot identify
the ratings (a model it never saw win); it is not offered.

Agreement: for grades, the Kendall tau between a judge's model means and the leave-one-out panel's (the
panel of the other judges), and the Pearson correlation over (model, item) scores with the leave-one-out
panel, each with a percentile bootstrap interval over questions; for pairwise judgments, the share of a
judge's judgments that match the majority verdict of the other judges on the same (model, other, item),
with a mid-p interval (and, where the others split evenly, the share of the other judges' verdicts it
matches, its interval taken with each judgment's comparisons as one cluster). ``most_disagreeing`` names the judge with the lowest agreement (grades: the lowest Pearson
correlation, then the lowest Kendall tau); it needs three judges at least, since two judges' agreement
with each other is one figure.

Every result is a plain JSON-able dict: floats are finite or None.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Mapping

import numpy as np

from evalcore.boundary.validation import check_integer
from evalcore.judging.audit import rate
from evalcore.judging.run import _rating_dict, _with_prior_fallback
from evalcore.judging.scores import (
    LEVEL,
    checked_scores,
    clustered_mean,
    item_key,
    json_safe,
    resampling_weights,
    split_turn,
)
from evalcore.ratings import aggregate, battles_from_arrays, bootstrap_bradley_terry

MAX_JUDGMENTS = 10_000_000


def _interval(draws: np.ndarray, value: float | None, rounds: int) -> dict:
    """``{value, ci_low, ci_high, rounds_used}`` from bootstrap draws (NaN = no value that round);
    the interval is None when more than half the rounds had no value."""
    ok = draws[np.isfinite(draws)]
    if value is None or ok.size < max(1, rounds / 2):
        return {"value": value, "ci_low": None, "ci_high": None, "rounds_used": int(ok.size)}
    low, high = np.quantile(ok, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"value": value, "ci_low": float(min(low, value)), "ci_high": float(max(high, value)),
            "rounds_used": int(ok.size)}  # fmt: skip


def _kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between the rows of ``x`` and ``y`` (shape (rounds, m)); NaN where either row is
    constant (or holds a NaN)."""
    iu = np.triu_indices(x.shape[1], k=1)
    sx = np.sign(x[:, :, None] - x[:, None, :])[:, iu[0], iu[1]]
    sy = np.sign(y[:, :, None] - y[:, None, :])[:, iu[0], iu[1]]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sx * sy).sum(axis=1) / np.sqrt((sx * sx).sum(axis=1) * (sy * sy).sum(axis=1))


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson correlation of ``x`` and ``y`` (shape (cells,)) under each row of weights ``w``
    (shape (rounds, cells)); NaN where either is constant under the weights."""
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (w @ x) / total, (w @ y) / total
        cov = (w @ (x * y)) / total - mx * my
        vx, vy = (w @ (x * x)) / total - mx * mx, (w @ (y * y)) / total - my * my
        r = cov / np.sqrt(vx * vy)
    tiny = 1e-12 * max(1.0, float(np.abs(x).max()) ** 2, float(np.abs(y).max()) ** 2)
    r[(vx <= tiny) | (vy <= tiny) | (total <= 0)] = np.nan
    return np.clip(r, -1.0, 1.0)


def _finite_or_none(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def panel_grades(per_judge: dict[str, dict[str, dict[str, float | None]]], *, rounds: int = 1000,
                 seed: int = 0) -> dict:  # fmt: skip
    """Panel score of graded answers (mean of per-judge z-scores) and each judge's agreement with it.

    Parameters
    ----------
    per_judge : dict judge -> dict model -> dict item id -> float or None
        None is a failed grade (left out). Item ids follow :func:`evalcore.judging.scores.grade_summary`:
        ``"q81/t2"`` belongs to question ``"q81"``, and the bootstrap resamples questions.
    rounds, seed : int
        Bootstrap rounds and seed (one set of resampled questions for every model and judge).

    Returns
    -------
    dict
        ``method`` (``"mean of per-judge z-scores"``), ``models``: {model: {mean, ci_low, ci_high, n,
        interval}} (the interval: Student's t with questions as clusters, as ``grade_summary``'s)
        (the panel score, in judge standard deviations; ``n`` = items with at least one grade),
        ``judges``: {judge: {n, failed, mean, sd, model_means: {model: raw mean or None},
        kendall_tau: {value, ci_low, ci_high, rounds_used, models},
        pearson: {value, ci_low, ci_high, rounds_used, cells}}}, ``most_disagreeing`` (judge or None),
        ``notes``, ``rounds``, ``seed``, ``level``.
    """
    if not isinstance(per_judge, Mapping):
        raise ValueError(f"per_judge must be a dict judge -> model -> item -> score, got {type(per_judge).__name__}")
    rounds = check_integer(rounds, "rounds", minimum=1)
    seed = check_integer(seed, "seed", minimum=0)
    judges = {}
    for judge, scores in per_judge.items():
        if not isinstance(judge, str) or not judge:
            raise ValueError(f"per_judge: judge name {judge!r} must be a non-empty string")
        judges[judge] = checked_scores(scores, f"judge {judge!r}")
    notes: list[str] = []
    names = list(judges)
    models = sorted({m for scores in judges.values() for m in scores})
    items = sorted({i for scores in judges.values() for row in scores.values() for i in row})
    cells = [(m, i) for m in models for i in items]
    cell_of = {c: k for k, c in enumerate(cells)}
    raw = np.full((len(names), len(cells)), np.nan)
    failed = dict.fromkeys(names, 0)
    for j, judge in enumerate(names):
        for model, row in judges[judge].items():
            for item, value in row.items():
                if value is None:
                    failed[judge] += 1
                else:
                    raw[j, cell_of[(model, item)]] = value
    z = np.zeros_like(raw)
    stats = {}
    for j, judge in enumerate(names):
        given = raw[j][np.isfinite(raw[j])]
        mean = float(given.mean()) if given.size else None
        sd = float(given.std()) if given.size else None
        if not given.size:
            notes.append(f"judge {judge!r}: no successful grade")
        elif given.size < 2 or sd <= 1e-12 * max(1.0, abs(mean)):
            notes.append(f"judge {judge!r} gives one score to everything: its z-scores are 0 (no ranking information)")
            sd = 0.0
        z[j] = (raw[j] - mean) / sd if sd else np.where(np.isfinite(raw[j]), 0.0, np.nan)
        stats[judge] = (given.size, mean, sd)
    if len(names) < 2:
        notes.append(f"{len(names)} judge(s): a panel needs at least 2, and agreement needs another judge")
    if len(names) == 2:
        notes.append("2 judges: each one's agreement is with the other, so no judge is the most disagreeing")
    if len(models) < 2:
        notes.append(f"{len(models)} model(s): no ranking to agree on (Kendall tau needs at least 2)")

    questions = sorted({split_turn(i)[0] for i in items})
    unit = {q: u for u, q in enumerate(questions)}
    cell_unit = np.array([unit[split_turn(i)[0]] for _, i in cells], dtype=np.int64)
    weights = resampling_weights(len(questions), rounds=rounds, seed=seed)
    cell_weights = weights[:, cell_unit] if cells else np.zeros((rounds, 0))

    def panel_of(rows: list[int]) -> np.ndarray:
        """Per-cell mean z over ``rows`` (judges); NaN where none of them graded the cell."""
        if not rows:
            return np.full(len(cells), np.nan)
        block = z[rows]
        count = np.isfinite(block).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, np.nansum(block, axis=0) / np.maximum(count, 1), np.nan)

    def model_means(values: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Mean of ``values`` (shape (cells,), NaN = missing) per model under weights ``w`` (rounds, cells):
        shape (rounds, models); NaN where a model has no weighted value."""
        ok = np.isfinite(values)
        filled = np.where(ok, values, 0.0)
        out = np.full((w.shape[0], len(models)), np.nan)
        for k in range(len(models)):
            span = slice(k * len(items), (k + 1) * len(items))
            drawn = w[:, span] @ ok[span]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, k] = np.where(drawn > 0, (w[:, span] @ filled[span]) / np.where(drawn > 0, drawn, 1), np.nan)
        return out

    panel = panel_of(list(range(len(names))))
    result_models = {}
    for k, model in enumerate(models):
        graded = [(float(panel[k * len(items) + n]), split_turn(item)[0]) for n, item in enumerate(items)
                  if np.isfinite(panel[k * len(items) + n])]  # fmt: skip
        result_models[model] = clustered_mean([v for v, _ in graded], [q for _, q in graded], notes=notes,
                                              what=f"model {model!r}")  # fmt: skip

    result_judges = {}
    ones = np.ones((1, len(cells)))
    for j, judge in enumerate(names):
        n, mean, sd = stats[judge]
        own = model_means(raw[j], ones)[0]
        entry = {"n": int(n), "failed": failed[judge], "mean": mean, "sd": sd,
                 "model_means": {m: _finite_or_none(own[k]) for k, m in enumerate(models)}}  # fmt: skip
        others = panel_of([o for o in range(len(names)) if o != j])
        # Kendall tau over the models both the judge and the other judges scored.
        loo = model_means(others, ones)[0]
        both = np.flatnonzero(np.isfinite(own) & np.isfinite(loo))
        tau = None
        if both.size >= 2:
            tau = _finite_or_none(_kendall_tau(own[None, both], loo[None, both])[0])
            draws = _kendall_tau(model_means(raw[j], cell_weights)[:, both], model_means(others, cell_weights)[:, both])
        else:
            draws = np.full(rounds, np.nan)
        entry["kendall_tau"] = {**_interval(draws, tau, rounds), "models": int(both.size)}
        # Pearson over the (model, item) cells both graded.
        shared = np.isfinite(raw[j]) & np.isfinite(others)
        r = None
        if shared.sum() >= 3:
            x, y = raw[j][shared], others[shared]
            r = _finite_or_none(_weighted_pearson(x, y, ones[:, shared])[0])
            draws = _weighted_pearson(x, y, cell_weights[:, shared])
        else:
            draws = np.full(rounds, np.nan)
        entry["pearson"] = {**_interval(draws, r, rounds), "cells": int(shared.sum())}
        result_judges[judge] = entry
    return json_safe({
        "method": "mean of per-judge z-scores",
        "models": result_models,
        "judges": result_judges,
        "most_disagreeing": _most_disagreeing([{j: e[f]["value"] for j, e in result_judges.items()}
                                               for f in ("pearson", "kendall_tau")]),
        "notes": notes, "rounds": rounds, "seed": seed, "level": LEVEL,
    })  # fmt: skip


def _most_disagreeing(figures: list[dict[str, float | None]]) -> str | None:
    """The judge with the lowest agreement: by the first figure (judge -> value) that at least two judges
    have and whose lowest value is not shared (within 1e-9); None when no figure decides, and with fewer
    than three judges (two judges' agreement with each other is one figure)."""
    if len(figures[0]) < 3:
        return None
    for values in figures:
        have = {judge: v for judge, v in values.items() if v is not None}
        if len(have) >= 2:
            ordered = sorted(have, key=lambda judge: (have[judge], judge))
            if have[ordered[1]] - have[ordered[0]] > 1e-9:
                return ordered[0]
    return None


def _checked_judgments(per_judge) -> dict[str, list[tuple[str, str, str, float | None]]]:
    if not isinstance(per_judge, Mapping):
        raise ValueError("per_judge must be a dict judge -> list of (model, other, item_id, score or None), "
                         f"got {type(per_judge).__name__}")  # fmt: skip
    out = {}
    total = 0
    for judge, rows in per_judge.items():
        if not isinstance(judge, str) or not judge:
            raise ValueError(f"per_judge: judge name {judge!r} must be a non-empty string")
        if isinstance(rows, str | bytes | Mapping) or not hasattr(rows, "__iter__"):
            raise ValueError(f"judge {judge!r}: judgments must be a list of (model, other, item_id, score) tuples")
        checked = []
        for k, row in enumerate(rows):
            where = f"judge {judge!r}, judgment {k}"
            if not isinstance(row, tuple | list) or len(row) != 4:
                raise ValueError(f"{where}: expected (model, other, item_id, score), got {row!r:.200}")
            model, other, item, score = row
            for name in (model, other):
                if not isinstance(name, str) or not name:
                    raise ValueError(f"{where}: model name {name!r} must be a non-empty string")
            if model == other:
                raise ValueError(f"{where}: a model compared with itself ({model!r})")
            item = item_key(item, where)
            if score is not None:
                if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
                    raise ValueError(f"{where} (model {model!r}, item {item!r}): score {score!r} is not a finite "
                                     "number (None marks a failed judgment)")  # fmt: skip
                if not 0.0 <= score <= 1.0:
                    raise ValueError(f"{where} (model {model!r}, item {item!r}): score {score!r} is outside [0, 1]")
                score = float(score)
            checked.append((model, other, item, score))
        total += len(checked)
        if total > MAX_JUDGMENTS:
            raise ValueError(f"more than {MAX_JUDGMENTS} judgments")
        out[judge] = checked
    return out


def _verdict(model: str, other: str, score: float) -> tuple[tuple[str, str], str]:
    """(the pair in name order, the winner's name or "tie") of one judgment."""
    pair = (model, other) if model < other else (other, model)
    return pair, model if score > 0.5 else other if score < 0.5 else "tie"


def panel_pairwise(per_judge: dict[str, list[tuple[str, str, str, float | None]]], *, rounds: int = 1000,
                   seed: int = 0) -> dict:  # fmt: skip
    """Panel ratings from pooled pairwise judgments and each judge's agreement with the others' majority.

    Parameters
    ----------
    per_judge : dict judge -> list of (model, other, item_id, score)
        ``score`` is the judge's preference for ``model`` in [0, 1] (a swap average, a log-prob P, or
        1 / 0.5 / 0 for a generated win / tie / loss); None is a failed judgment (left out, counted).
    rounds, seed : int
        Bootstrap rounds (over judgments) and seed of the Bradley-Terry intervals.

    Returns
    -------
    dict
        ``method`` (``"bradley_terry_pooled"``), ``ratings``: {model: {rating, ci_low, ci_high}} or None,
        ``prior``, ``judges``: {judge: {judgments, failed, agreement: {value, ci_low, ci_high, n,
        interval}, agreement_pairwise: {same keys}}}, ``most_disagreeing`` (judge or None), ``notes``,
        ``rounds``, ``seed``, ``level``.

    Each judgment is a battle won by the side with score > 0.5 (a tie at exactly 0.5), as in
    :func:`evalcore.judging.run.judge_run`. A judge's agreement is over its judgments of a
    (model, other, item) that at least one other judge also judged and whose other judges' verdicts have
    a strict majority (win, loss or tie; the key is the same whichever of the two models comes first).
    ``agreement_pairwise`` is the share of matching verdicts over every (this judgment, another judge's
    judgment of the same key) pair: it is defined where the others split evenly (with three judges, a
    judge agreeing with one of the other two has no majority to agree with); its comparisons share
    judgments, so its interval counts each judgment's comparisons as one cluster (``mid-p-effective``
    where they make it wider). Both shares are :func:`evalcore.judging.audit.rate` figures
    (``{value, stderr, ci_low, ci_high, n, interval}``, mid-p). ``most_disagreeing`` is the judge
    with the lowest ``agreement`` when at least two judges have one (and the lowest is not shared), else
    the lowest ``agreement_pairwise``.
    """
    judged = _checked_judgments(per_judge)
    rounds = check_integer(rounds, "rounds", minimum=1)
    seed = check_integer(seed, "seed", minimum=0)
    notes: list[str] = []
    model_a, model_b, winner = [], [], []
    verdicts: dict[tuple, Counter] = {}
    for judge, rows in judged.items():
        for model, other, item, score in rows:
            if score is None:
                continue
            model_a.append(model)
            model_b.append(other)
            winner.append("model_a" if score > 0.5 else "model_b" if score < 0.5 else "tie")
            pair, won = _verdict(model, other, score)
            verdicts.setdefault((*pair, item), Counter())[(judge, won)] += 1
    if len(judged) < 2:
        notes.append(f"{len(judged)} judge(s): a panel needs at least 2, and agreement needs another judge")
    if len(judged) == 2:
        notes.append("2 judges: each one's agreement is with the other, so no judge is the most disagreeing")
    models = sorted({m for rows in judged.values() for r in rows for m in r[:2]})
    ratings, prior = None, None
    if len(models) < 2 or not winner:
        notes.append("no successful judgment between two models: no ratings")
    else:
        counts = aggregate(battles_from_arrays(model_a, model_b, winner))
        result, prior = _with_prior_fallback(
            lambda p: bootstrap_bradley_terry(counts, rounds=rounds, rng=np.random.default_rng(seed), prior=p,
                                              keep_samples=False),
            "Bradley-Terry", notes,
        )  # fmt: skip
        ratings = _rating_dict(result)
        notes.extend(result.notes)
    judges_out = {}
    for judge, rows in judged.items():
        agree, matches, match_of = [], [], []
        for k, (model, other, item, score) in enumerate(rows):
            if score is None:
                continue
            pair, won = _verdict(model, other, score)
            others = Counter()
            for (who, verdict), count in verdicts[(*pair, item)].items():
                if who != judge:
                    others[verdict] += count
            for verdict, count in others.items():
                matches.extend([float(verdict == won)] * count)
                match_of.extend([k] * count)  # the comparisons of one judgment: one cluster
            top = others.most_common(2)
            if not top or (len(top) == 2 and top[0][1] == top[1][1]):
                continue  # nobody else judged it, or the other judges split evenly: no majority
            agree.append(float(won == top[0][0]))
        judges_out[judge] = {"judgments": len(rows), "failed": sum(1 for r in rows if r[3] is None),
                             "agreement": rate(agree), "agreement_pairwise": rate(matches, clusters=match_of)}  # fmt: skip
    return json_safe({
        "method": "bradley_terry_pooled",
        "ratings": ratings, "prior": prior,
        "judges": judges_out,
        "most_disagreeing": _most_disagreeing([{j: e[f]["value"] for j, e in judges_out.items()}
                                               for f in ("agreement", "agreement_pairwise")]),
        "notes": notes, "rounds": rounds, "seed": seed, "level": LEVEL,
    })  # fmt: skip
