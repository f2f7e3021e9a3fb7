"""Rewards of chosen and rejected answers, and accuracy per category with mid-p intervals.

Two kinds of reward model:

- a sequence-classification model (:class:`~evalcore.reward.classifier.SequenceClassifierReward`): the
  reward is its score of the conversation;
- a DPO policy against its reference (any two backends with ``loglikelihood``): the implicit reward
  ``beta * (log p_policy(answer | prompt) - log p_ref(answer | prompt))``, exactly the answer's tokens
  scored after the prompt rendered as a user turn by the chat template with the assistant's turn opened
  (the end-of-turn text the template closes the answer with is part of the answer; the boundary is
  token-exact, see :func:`dpo_tokens`).

A pair is ``correct`` when the chosen answer's reward is strictly higher, ``tie`` when both are equal
(a tie is never correct: it counts in ``n`` as a miss and is counted apart), else ``wrong``. A pair
too long for the model is ``skipped`` and left out of every figure.

Pairs may carry a ``subset`` (RewardBench's records do). A category's figure is then RewardBench's
section score: the mean of its subsets' accuracies weighted by each subset's number of scored pairs
(:data:`CATEGORY_RULE`), which is the share of the category's scored pairs that are correct, so it keeps
its mid-p interval; each subset gets its own figure too.

Accuracy is a proportion (a tie counts 0, not 0.5): its interval is Lancaster's mid-p exact interval
(:func:`evalcore.stats.estimates.proportion`), which does not collapse at 0 or n correct and keeps above
90% coverage at the few pairs a subset may have (Wilson's falls to 85% at n = 4 and 15 near p = 0.01).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from evalcore.judging.audit import rate
from evalcore.reward.pairs import PairsFile, RewardPair

OUTCOMES = ("correct", "wrong", "tie")
CATEGORY_RULE = ("a category's accuracy is the mean of its subsets' accuracies weighted by each subset's number "
                 "of scored pairs (RewardBench's section score with weights = subset sizes), which equals the "
                 "share of its scored pairs that are correct")  # fmt: skip


@dataclass(frozen=True)
class PairReward:
    """The rewards of one pair; ``logprobs`` (DPO only) holds the four sums behind them."""

    pair_id: str
    category: str
    label: int
    status: str  # "ok" or "skipped"
    reward_chosen: float | None = None
    reward_rejected: float | None = None
    outcome: str | None = None  # "correct", "wrong" or "tie" when ok
    logprobs: dict | None = None
    reason: str | None = None
    subset: str | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def outcome_of(chosen: float, rejected: float) -> str:
    return "correct" if chosen > rejected else "tie" if chosen == rejected else "wrong"


def _record(pair: RewardPair, chosen, rejected, logprobs=None) -> PairReward:
    if chosen is None or rejected is None:
        return PairReward(pair.pair_id, pair.category, pair.label, "skipped",
                          reason="the conversation is longer than the model's max_length", subset=pair.subset)  # fmt: skip
    if not (math.isfinite(chosen) and math.isfinite(rejected)):
        raise ValueError(
            f"pair {pair.pair_id}: the model gave a reward that is not finite ({chosen}, {rejected})"
        )
    return PairReward(
        pair.pair_id,
        pair.category,
        pair.label,
        "ok",
        chosen,
        rejected,
        outcome_of(chosen, rejected),
        logprobs,
        subset=pair.subset,
    )


def classifier_rewards(model, pairs: Sequence[RewardPair], *, progress=None) -> list[PairReward]:
    """Score every pair's chosen and rejected answer with a sequence-classification reward model
    (all conversations in one call, so the model batches them). ``progress(n)`` is called as
    conversations are scored (it changes nothing in the computation)."""
    conversations = [(p.prompt, a) for p in pairs for a in (p.chosen, p.rejected)]
    values = model.rewards(conversations, progress=progress) if progress else model.rewards(conversations)
    return [_record(p, values[2 * i], values[2 * i + 1]) for i, p in enumerate(pairs)]


def dpo_context(backend, prompt: str, answer: str) -> tuple[str, str]:
    """(prompt text, answer text) for log p(answer | prompt): the prompt as a user turn with the assistant's
    turn opened (the chat template's generation prompt), and the answer as the template closes it;
    ``prompt + "\n\n"`` and the bare answer for a model without a chat template."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return f"{prompt}\n\n", answer
    context = backend.chat_context([{"role": "user", "content": prompt}])
    full = tokenizer.apply_chat_template([{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                                         tokenize=False)  # fmt: skip
    return (context, full[len(context) :]) if full.startswith(context) else (context, answer)


def dpo_tokens(backend, prompt: str, answer: str) -> tuple[list[int], list[int]]:
    """(prompt ids, answer ids) for log p(answer | prompt), split exactly where the rendered prompt ends.

    The prompt's ids are the rendered prompt (:func:`dpo_context`) encoded alone, as the model is sent it
    before it generates; no trailing whitespace is moved (the harness's rule for benchmark strings would
    put the newline that ends SmolLM2's ``<|im_start|>assistant`` among the answer's tokens). The answer's
    ids are the tokens after those in the encoding of prompt + answer, when that encoding begins with the
    prompt's ids (no token straddles the boundary: the answer is tokenised as in the whole conversation).
    When a token merges across the boundary (an answer that begins with a newline after SmolLM2's
    ``assistant\n``: ``\n\n`` is one token) the prompt keeps its own ids, since generation starts from
    them, and the answer is encoded on its own: every scored token is then the answer's, none the prompt's.
    """
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(f"the {getattr(backend, 'name', 'given')!r} backend has no tokenizer: DPO rewards score token ids")
    context, continuation = dpo_context(backend, prompt, answer)
    context_ids = list(backend.tok_encode(context))
    whole = list(backend.tok_encode(context + continuation))
    if whole[: len(context_ids)] == context_ids:
        answer_ids = whole[len(context_ids) :]
    else:
        answer_ids = list(tokenizer.encode(continuation, add_special_tokens=False))
    if not answer_ids:
        raise ValueError("the answer has no tokens to score")
    return context_ids, answer_ids


def dpo_rewards(policy, reference, pairs: Sequence[RewardPair], *, beta: float, progress=None) -> list[PairReward]:
    """DPO implicit rewards of every pair. ``reference`` may be ``policy`` itself (every reward is 0).
    ``progress(n)`` is handed to each backend's ``loglikelihood``."""
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a positive number, got {beta!r}")
    sums = {}
    for role, backend in (("policy", policy), ("reference", reference)):
        if role == "reference" and reference is policy:
            sums[role] = sums["policy"]
            continue
        requests = [dpo_tokens(backend, p.prompt, a) for p in pairs for a in (p.chosen, p.rejected)]
        if progress:
            scored = backend.loglikelihood_tokens(requests, progress=progress)
        else:
            scored = backend.loglikelihood_tokens(requests)
        sums[role] = [r.logprob for r in scored]
    records = []
    for i, pair in enumerate(pairs):
        lp = {"policy_chosen": sums["policy"][2 * i], "policy_rejected": sums["policy"][2 * i + 1],
              "reference_chosen": sums["reference"][2 * i], "reference_rejected": sums["reference"][2 * i + 1]}  # fmt: skip
        chosen = beta * (lp["policy_chosen"] - lp["reference_chosen"])
        rejected = beta * (lp["policy_rejected"] - lp["reference_rejected"])
        records.append(_record(pair, chosen, rejected, lp))
    return records


def _figure(records: Sequence[PairReward]) -> dict:
    scored = [r for r in records if r.status == "ok"]
    figure = rate([float(r.outcome == "correct") for r in scored])
    figure.update({o: sum(1 for r in scored if r.outcome == o) for o in OUTCOMES})
    figure["skipped"] = len(records) - len(scored)
    return figure


def reward_report(records: Sequence[PairReward], files: Sequence[PairsFile]) -> dict:
    """Accuracy (share of pairs whose chosen answer gets the higher reward) overall and per category.

    Each figure is ``{value, stderr, ci_low, ci_high, n, interval: "mid-p", correct, wrong, tie, skipped}``
    (``stderr`` is the interval's, None where it is lopsided);
    ``value`` and the interval are None when no pair of it was scored. Categories come in file order.
    ``subsets`` maps each category whose pairs name subsets to ``{subset: figure}`` (by name);
    such a category's figure is its subsets' size-weighted mean (:data:`CATEGORY_RULE`), computed as
    the pooled share, which it equals exactly.
    """
    categories = {f.category: _figure([r for r in records if r.category == f.category]) for f in files}
    subsets: dict[str, dict] = {}
    for f in files:
        named = [r for r in records if r.category == f.category and r.subset is not None]
        names = sorted({r.subset for r in named})
        if names:
            subsets[f.category] = {s: _figure([r for r in named if r.subset == s]) for s in names}
    return {"pairs": len(records), "overall": _figure(records), "categories": categories, "subsets": subsets,
            "category_rule": CATEGORY_RULE, "pairs_files": [f.as_dict() for f in files],
            "skipped_pairs": [r.pair_id for r in records if r.status != "ok"]}  # fmt: skip


def weighted_section(subset_figures: dict) -> float | None:
    """RewardBench's section score from subset figures: sum(n_s * accuracy_s) / sum(n_s) over subsets
    with scored pairs (None when none has). Equal to the pooled accuracy; the tests pin that."""
    scored = [f for f in subset_figures.values() if f["n"]]
    total = sum(f["n"] for f in scored)
    return sum(f["n"] * f["value"] for f in scored) / total if total else None
