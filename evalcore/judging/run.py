"""Static scores from a judge: models answer a fixed instruction set, the judge compares each answer
with the baseline's in both orders, and the results are win rates, length-controlled win rates and
Bradley-Terry ratings (plain and style-controlled), each with an interval.

- win rate: the mean swap-average preference for the model's answer, in percent, with a mid-p interval
  at its effective size (a mean of values in [0, 1]: :func:`evalcore.stats.estimates.bounded_mean`), and the
  discrete win rate (wins plus half the ties) likewise; ``standard_error`` is the interval's (None where
  it is lopsided); the length-controlled win rate and its interval (``delta-mid-p``: the mid-p interval
  at the effective size the delta-method error implies, at most twice the pairs) come from
  :func:`evalcore.ratings.length_controlled_win_rate` (AlpacaEval 2's GLM), which needs at least two
  models besides the baseline; every figure records the ``n`` pairs it rests on;
- Bradley-Terry: every successful judgment is a battle between the model shown first and the one shown
  second (a generated verdict counts ``weight`` times, Arena-Hard's 3 for a strong verdict; a log-prob
  verdict is won by the side with P > 0.5), fitted across all models with a bootstrap over battles; the
  style-controlled variant adds the answers' length and markdown counts as covariates.

Judgments and answers are cached (see :mod:`evalcore.judging.cache`), and every random draw comes from
``seed``, so a re-run reproduces every number exactly without a model call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from evalcore.judging.cache import AnswerCache, JudgmentCache
from evalcore.judging.judge import PairwiseProtocols, generate_texts, judge_assigned_pairs
from evalcore.judging.protocol import JudgeProtocol
from evalcore.judging.records import Judgment, PairItem, pair_outcomes
from evalcore.models.base import Backend
from evalcore.ratings import (
    aggregate,
    annotations_from_arrays,
    battles_from_arrays,
    bootstrap_bradley_terry,
    fit_style_controlled,
    length_controlled_win_rate,
    style_vector,
)
from evalcore.ratings.lc import discrete_win_rate_estimate, lc_estimate, win_rate_estimate

MAX_INSTRUCTIONS = 100_000
LEVEL = 0.95


@dataclass(frozen=True)
class Instruction:
    instruction_id: str
    text: str


@dataclass(frozen=True)
class GenerationSettings:
    """Greedy decoding settings for answers (part of the answer-cache key)."""

    max_new_tokens: int = 256
    system: str | None = None


def read_instructions(path: str | Path, *, limit: int | None = None) -> list[Instruction]:
    """Instructions from JSON (a list) or JSONL: each an object with ``instruction``, ``input`` or
    ``question`` (the first present), and optionally ``id`` / ``instruction_id`` (default: the index)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"instruction file {str(path)!r} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"instruction file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if text.lstrip().startswith("["):
        try:
            records = list(enumerate(json.loads(text)))
        except json.JSONDecodeError as exc:
            raise ValueError(f"instruction file {str(path)!r} is not valid JSON: {exc}") from None
        except RecursionError:
            raise ValueError(f"instruction file {str(path)!r} nests JSON too deeply") from None
    else:
        records = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((f"line {lineno}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: line {lineno} is not valid JSON: {exc.msg}") from None
                except RecursionError:
                    raise ValueError(f"{path}: line {lineno} nests JSON too deeply") from None
    out, seen = [], set()
    for index, (where, record) in enumerate(records[: limit or MAX_INSTRUCTIONS]):
        field = next((k for k in ("instruction", "input", "question") if isinstance(record, dict) and k in record), None)
        if field is None or not isinstance(record[field], str) or not record[field].strip():
            raise ValueError(f"{path}: instruction {index} ({where}) needs a non-empty instruction, input or question")
        iid = str(record.get("instruction_id", record.get("id", index)))
        if iid in seen:
            raise ValueError(f"{path}: instruction id {iid!r} appears twice")
        seen.add(iid)
        out.append(Instruction(iid, record[field]))
    if not out:
        raise ValueError(f"instruction file {str(path)!r} holds no instructions")
    return out


def generate_answers(backend: Backend, instructions: Sequence[Instruction], *, settings: GenerationSettings,
                     cache: AnswerCache | None = None, model_key: str | None = None) -> list[dict]:
    """Each instruction's greedy answer: ``{instruction_id, answer, cached}``, in order.

    With ``cache`` (and ``model_key``, default the backend's identity key) stored answers are reused.
    A failed generation raises ValueError naming the instruction.
    """
    key = model_key or backend.identity.key
    config = asdict(settings)
    found = cache.lookup(key, config, [i.text for i in instructions]) if cache is not None else {}
    keys = [AnswerCache.key(key, config, i.text) for i in instructions]
    todo = [i for i, k in enumerate(keys) if k not in found]
    texts = {}
    if todo:
        system = [{"role": "system", "content": settings.system}] if settings.system else []
        conversations = [[*system, {"role": "user", "content": instructions[i].text}] for i in todo]
        for i, text in zip(todo, generate_texts(backend, conversations, max_new_tokens=settings.max_new_tokens)):
            if isinstance(text, BaseException):
                raise ValueError(f"instruction {instructions[i].instruction_id}: generation failed: {text}")
            texts[i] = text
        if cache is not None:
            cache.save(key, config, {instructions[i].text: {"answer": t} for i, t in texts.items()})
    return [
        {"instruction_id": ins.instruction_id, "answer": texts[i] if i in texts else found[keys[i]]["answer"],
         "cached": i not in texts}
        for i, ins in enumerate(instructions)
    ]


def judge_run(
    judge: Backend,
    protocol: JudgeProtocol,
    instructions: Sequence[Instruction],
    answers: dict[str, Sequence[str]],
    *,
    baseline: str,
    cache: JudgmentCache | None = None,
    rounds: int = 1000,
    seed: int = 0,
    token_budget: int | None = None,
    pair_for: Callable[[str, int, str], tuple[JudgeProtocol, PairItem]] | None = None,
) -> tuple[dict, list[tuple[str, Judgment]]]:
    """Judge every model's answers against the baseline's, in both orders, and score them.

    Parameters
    ----------
    judge : Backend
    protocol : JudgeProtocol (pairwise), or PairwiseProtocols
        A family needs ``pair_for``, which picks each pair's member.
    instructions : sequence of Instruction, length k
    answers : dict model name -> sequence of str, each of length k
        Must include ``baseline``.
    baseline : str
    cache : JudgmentCache, optional
    rounds, seed : int
        Bootstrap rounds and seed for the Bradley-Terry intervals.
    pair_for : callable(model, k, pair_id) -> (protocol, PairItem), optional
        Builds the pair comparing ``model``'s ``k``-th answer with the baseline's (``answer_1`` the
        baseline's), and the protocol judging it: how a run over two-turn questions shows both turns and
        references. Default: ``PairItem(pair_id, instruction text, baseline answer, model answer)``.

    Returns
    -------
    (results, judgments)
        ``results`` is a JSON-ready dict (``models``: win rates and LC win rates per model,
        ``bradley_terry`` and ``bradley_terry_style``: rating with interval per model, ``notes``);
        ``judgments`` lists ``(model, Judgment)`` with ``pair_id == "<model>/<instruction_id>"``.
    """
    if baseline not in answers:
        raise ValueError(f"baseline {baseline!r} has no answers")
    if len(answers) < 2:
        raise ValueError("judge_run needs at least one model besides the baseline")
    for name, texts in answers.items():
        if len(texts) != len(instructions):
            raise ValueError(f"model {name!r} has {len(texts)} answers for {len(instructions)} instructions")
    if isinstance(protocol, PairwiseProtocols) and pair_for is None:
        raise ValueError("a family of pairwise protocols needs pair_for, which picks each pair's protocol")
    models = [m for m in answers if m != baseline]
    assigned, owner = [], {}
    for model in models:
        for k, ins in enumerate(instructions):
            pair_id = f"{model}/{ins.instruction_id}"
            owner[pair_id] = (model, k)
            if pair_for is None:
                assigned.append((protocol, PairItem(pair_id, ins.text, answers[baseline][k], answers[model][k])))
            else:
                assigned.append(pair_for(model, k, pair_id))
    question_of = {p.pair_id: owner[p.pair_id][1] for _, p in assigned}
    judgments = judge_assigned_pairs(judge, assigned, cache=cache, token_budget=token_budget,
                                     share_by=lambda item, order: (question_of[item.pair_id], order))
    notes: list[str] = []
    results = {
        "protocol": protocol_record(protocol),
        "baseline": baseline,
        "instructions": len(instructions),
        "models": _win_rates(judgments, owner, models, instructions, answers, baseline, notes),
    }
    battles = _battles(judgments, owner, answers, baseline)
    results["bradley_terry"] = _bradley_terry(battles, rounds=rounds, seed=seed, notes=notes)
    results["bradley_terry_style"] = _style_controlled(battles, rounds=rounds, seed=seed, notes=notes)
    results["notes"] = notes
    return results, [(owner[j.pair_id][0], j) for j in judgments]


def protocol_record(protocol: JudgeProtocol | PairwiseProtocols) -> dict:
    """What a run's results say of its protocol: name, content hash and source (where the wording comes
    from); for a family, its hash and each member's."""
    if isinstance(protocol, JudgeProtocol):
        return {"name": protocol.name, "sha256": protocol.sha256, "source": protocol.source}
    return {"sha256": protocol.sha256, "reference_categories": list(protocol.reference_categories),
            "members": {role: {"name": p.name, "sha256": p.sha256, "source": p.source}
                        for role, p in protocol.members.items()}}  # fmt: skip


def _win_rates(judgments, owner, models, instructions, answers, baseline, notes) -> dict:
    outcomes, failed = pair_outcomes(judgments)
    out = {m: {"n": 0, "failed_pairs": sum(1 for f in failed if owner[f][0] == m)} for m in models}
    if not outcomes:
        notes.append("every judgment failed: no win rates")
        return out
    rows = [owner[o.pair_id] for o in outcomes]
    ann = annotations_from_arrays(
        [m for m, _ in rows], [instructions[k].instruction_id for _, k in rows],
        [len(answers[baseline][k]) for _, k in rows], [len(answers[m][k]) for m, k in rows],
        [2.0 - o.swap_average for o in outcomes],  # 2 = the model's answer preferred
    )  # fmt: skip
    try:
        lc = length_controlled_win_rate(ann, baseline=baseline)
    except ValueError as exc:
        notes.append(f"no length-controlled win rate: {exc}")
        lc = None
    for m in models:
        idx = np.flatnonzero(ann.model == ann.models.index(m)) if m in ann.models else np.array([], int)
        pref = ann.preference[idx] - 1.0
        entry = out[m]
        entry["n"] = int(idx.size)
        if not idx.size:
            entry["win_rate"] = entry["standard_error"] = None
            continue
        entry["level"] = LEVEL
        raw, discrete = win_rate_estimate(pref, level=LEVEL), discrete_win_rate_estimate(pref, level=LEVEL)
        entry.update(_flat(raw, "win_rate", "win_rate", "standard_error"))
        entry.update(_flat(discrete, "discrete_win_rate", "discrete", "discrete_standard_error"))
        if lc is not None and m in lc.models:
            i = lc.models.index(m)
            estimate = lc_estimate(lc.lc_win_rate[i], lc.lc_standard_error[i], int(idx.size), level=LEVEL)
            entry.update(_flat(estimate, "lc_win_rate", "lc", "lc_standard_error"))
    return out


def _flat(estimate, value_key: str, prefix: str, se_key: str) -> dict:
    """A win-rate estimate as the entry's flat keys: the value, ``<prefix>_ci_low``, ``<prefix>_ci_high``,
    ``<prefix>_interval`` (the method) and the interval's standard error (None where it is lopsided)."""
    return {value_key: float(estimate.value), f"{prefix}_ci_low": estimate.ci_low,
            f"{prefix}_ci_high": estimate.ci_high, f"{prefix}_interval": estimate.method, se_key: estimate.se}  # fmt: skip


def _battles(judgments, owner, answers, baseline):
    model_a, model_b, winner, style_a, style_b = [], [], [], [], []
    styles: dict[tuple[str, int], np.ndarray] = {}

    def style(model, k):
        if (model, k) not in styles:
            styles[(model, k)] = style_vector(answers[model][k])
        return styles[(model, k)]

    for j in judgments:
        if not j.ok:
            continue
        model, k = owner[j.pair_id]
        first, second = (baseline, model) if j.order == "ab" else (model, baseline)
        score = j.first_score
        result = "model_a" if score > 0.5 else "model_b" if score < 0.5 else "tie"
        for _ in range(max(1, int(round(j.weight)))):
            model_a.append(first)
            model_b.append(second)
            winner.append(result)
            style_a.append(style(first, k))
            style_b.append(style(second, k))
    if not winner:
        return None
    return battles_from_arrays(model_a, model_b, winner, style_a=np.array(style_a), style_b=np.array(style_b))


def _rating_dict(result) -> dict:
    return {m: {"rating": float(result.ratings[i]), "ci_low": float(result.ci_low[i]),
                "ci_high": float(result.ci_high[i])} for i, m in enumerate(result.models)}


def _with_prior_fallback(fit, what: str, notes: list[str]):
    """Fit without a prior; where the data cannot identify the ratings (a model that never wins or
    never loses), fit again with a weak prior (1.0) and say so in the notes."""
    try:
        return fit(None), 0.0
    except ValueError as exc:
        notes.append(f"{what}: fitted with prior=1.0 ({exc})")
        return fit(1.0), 1.0


def _bradley_terry(battles, *, rounds: int, seed: int, notes: list[str]) -> dict | None:
    if battles is None:
        return None
    counts = aggregate(battles)
    result, prior = _with_prior_fallback(
        lambda prior: bootstrap_bradley_terry(counts, rounds=rounds, rng=np.random.default_rng(seed), prior=prior,
                                              keep_samples=False),
        "Bradley-Terry", notes,
    )
    return {"ratings": _rating_dict(result), "prior": prior, "rounds": rounds, "seed": seed}


def _style_controlled(battles, *, rounds: int, seed: int, notes: list[str]) -> dict | None:
    if battles is None:
        return None
    try:
        result, prior = _with_prior_fallback(
            lambda prior: fit_style_controlled(battles, rounds=rounds, rng=np.random.default_rng(seed), prior=prior),
            "style-controlled Bradley-Terry", notes,
        )
    except ValueError as exc:
        notes.append(f"no style-controlled rating: {exc}")
        return None
    coefficients = {f: float(c) for f, c in zip(result.features, result.coefficients)}
    return {"ratings": _rating_dict(result.ratings), "coefficients": coefficients, "prior": prior,
            "rounds": rounds, "seed": seed}
