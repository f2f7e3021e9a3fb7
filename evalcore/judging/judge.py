"""Judge pairs in both orders through any evalcore backend, with a judgment cache.

::

    from evalcore.judging import judge_pairs, load_protocol, read_pairs
    from evalcore.models import load_backend

    judge = load_backend("hf", path="/models/SmolLM2-135M-Instruct", dtype="float32")
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    judgments = judge_pairs(judge, protocol, read_pairs("llmbar_natural.json"))

Log-prob protocols run batched with shared prefixes on a backend exposing its transformers ``model``
and ``tokenizer`` (``hf``); other backends answer :meth:`~evalcore.models.base.Backend.next_token_logprobs`
(``vllm``; ``openai`` given ``tokenizer=DIR``), and a verdict token they cannot report fails that
judgment (never a 0.5). Generated verdicts work with every backend: those that render chat prompts
themselves (``hf``, ``vllm``) generate in batches through ``generate_until``, the others (``openai``)
answer one chat request per judgment. A judgment whose call fails (a timeout, a verdict that matches no pattern, a
prompt longer than the judge's window) is recorded with ``status="failed"`` and the error.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from evalcore.judging.cache import JudgmentCache
from evalcore.judging.logprob import p_first_batched, prompt_token_ids
from evalcore.judging.protocol import JudgeProtocol, check_family
from evalcore.judging.records import ORDERS, Judgment, PairItem
from evalcore.models.base import Backend, GenerationRequest

# Passes of about this many tokens on CPU (with batches padded by at most logprob.MAX_PADDING): 4096 was
# the fastest of 1024, 4096 and 8192 in bench/judging.py (docs/PERFORMANCE.md, "Judging").
CPU_TOKEN_BUDGET = 4096
MAX_ERROR_CHARS = 500


def judge_key(backend: Backend) -> str:
    """What identifies the judge in cache keys: its weights hash and dtype (a remote endpoint, whose
    weights are unknown, is identified by its model name and URL)."""
    identity = backend.identity
    weights = identity.weights_sha256 or f"{identity.name}@{identity.extra.get('base_url', '')}"
    return f"{identity.backend}:{weights}:{identity.dtype}"


def prompt_sha256(messages: list[dict], prefix: str | None) -> str:
    """SHA-256 of the judge prompt: the conversation and the verdict prefix, as canonical JSON."""
    payload = json.dumps({"messages": messages, "prefix": prefix or ""}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def order_messages(protocol: JudgeProtocol, item: PairItem, order: str) -> list[dict]:
    """The judge conversation for ``item`` shown in ``order`` (``"ab"``: answer_1 first); a two-turn
    protocol shows both turns of the item's conversations (``item.questions`` etc.)."""
    if protocol.turns == 1 and len(item.questions) <= 1:
        first, second = (item.answer_1, item.answer_2) if order == "ab" else (item.answer_2, item.answer_1)
        return protocol.messages(question=item.question, answer_a=first, answer_b=second, reference=item.reference)
    answers = (item.answers_1 or (item.answer_1,), item.answers_2 or (item.answer_2,))
    first, second = answers if order == "ab" else answers[::-1]
    references = item.references or ((item.reference,) if item.reference is not None else None)
    return protocol.pair_messages(questions=item.questions or (item.question,), answers_a=first, answers_b=second,
                                  references=references if protocol.uses_reference else None)  # fmt: skip


# FastChat llm_judge's verdict patterns (fastchat/llm_judge/common.py): the first match wins, and the
# single-bracket form is tried only when the double-bracket one occurs nowhere.
FASTCHAT_ONE_SCORE = (re.compile(r"\[\[(\d+\.?\d*)\]\]"), re.compile(r"\[(\d+\.?\d*)\]"))
FASTCHAT_TWO_SCORES = (re.compile(r"\[\[(\d+\.?\d*),\s?(\d+\.?\d*)\]\]"), re.compile(r"\[(\d+\.?\d*),\s?(\d+\.?\d*)\]"))
FASTCHAT_TIE_DELTA = 0.1  # two ratings this close are a tie
FASTCHAT_LABELS = (("[[A]]", "A"), ("[[B]]", "B"), ("[[C]]", "tie"))  # checked in this order, wherever they sit


def _fastchat_number(text: str) -> float:
    """A rating as FastChat reads it (Python's literal syntax: ``"8"``, ``"8.5"``, ``"8."``); a string
    it cannot read (``"08"``, digits of other scripts, an overflowing number) is a failed verdict."""
    try:
        value = float(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, OverflowError, MemoryError, RecursionError):
        raise ValueError(f"FastChat's parser cannot read the rating {text[:40]!r} as a number") from None
    if not math.isfinite(value):
        raise ValueError(f"the rating {text[:40]!r} is not a finite number")
    return value


def _fastchat_search(patterns: tuple[re.Pattern, ...], text: str, what: str) -> re.Match:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return match
    raise ValueError(f"the judge's answer contains no {what} (FastChat's parser looks for "
                     f"{' then '.join(p.pattern for p in patterns)})")  # fmt: skip


def parse_generated(protocol: JudgeProtocol, text: str) -> tuple[str, str, float]:
    """(matched pattern, winner A/B/tie, weight) from a generated verdict.

    Podium's rule: exactly one of the protocol's patterns must occur (repeats of it are fine); none,
    or two different ones, raise ValueError. FastChat's (``parse: fastchat``): for ``[[A]]``, the
    first of ``[[A]]``, ``[[B]]``, ``[[C]]`` (tie) that occurs anywhere in the text, checked in that
    order; for ``[[rating_a,rating_b]]``, the first ``[[a, b]]`` (else ``[a, b]``), a tie when the two
    ratings differ by at most 0.1. No verdict raises ValueError (FastChat's ``"error"``).
    """
    if protocol.verdict.fastchat:
        if protocol.verdict.output_format == "[[A]]":
            for label, winner in FASTCHAT_LABELS:
                if label in text:
                    return label, winner, 1.0
            raise ValueError("the judge's answer contains no verdict (FastChat's parser looks for [[A]], then [[B]], "
                             "then [[C]])")  # fmt: skip
        match = _fastchat_search(FASTCHAT_TWO_SCORES, text, "pair of ratings")
        first, second = (_fastchat_number(g.strip()) for g in match.groups())
        winner = "tie" if abs(first - second) <= FASTCHAT_TIE_DELTA else "A" if first > second else "B"
        return match.group(0), winner, 1.0
    found = [o for o in protocol.verdict.outcomes if o.pattern in text]
    if not found:
        patterns = ", ".join(o.pattern for o in protocol.verdict.outcomes)
        raise ValueError(f"the judge's answer contains no verdict ({patterns})")
    if len(found) > 1:
        raise ValueError(f"the judge's answer is ambiguous: it contains {found[0].pattern} and {found[1].pattern}")
    return found[0].pattern, found[0].winner, found[0].weight


def parse_score(protocol: JudgeProtocol, text: str) -> float:
    """The last score matching the protocol's regex, checked against its range.

    FastChat's rule (``parse: fastchat``): the first ``[[n]]`` in the text, else the first ``[n]``,
    read as a Python literal, with no range check (FastChat keeps whatever number the judge wrote);
    no match raises ValueError (FastChat's rating -1, which its results leave out)."""
    verdict = protocol.verdict
    if verdict.fastchat:
        return _fastchat_number(_fastchat_search(FASTCHAT_ONE_SCORE, text, "rating").group(1))
    matches = re.findall(verdict.score_regex, text)
    if not matches:
        raise ValueError(f"the judge's answer contains no score matching the pattern {verdict.score_regex}")
    score = float(matches[-1])
    if not verdict.score_min <= score <= verdict.score_max:
        raise ValueError(f"score {score:g} is outside [{verdict.score_min:g}, {verdict.score_max:g}]")
    return score


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:MAX_ERROR_CHARS]


def generate_texts(backend: Backend, conversations: Sequence[list[dict]], *, max_new_tokens: int,
                   progress=None) -> list[str | BaseException]:
    """Greedy answers to each conversation (or the exception that stopped it), in order.

    Backends that render chat prompts (hf, vllm) generate in one batch; a backend that sends messages
    (``openai-chat``, even when given a tokenizer for log-likelihood tasks) gets one chat request per
    conversation, so its server applies its own template once."""
    contexts = None
    if not getattr(backend, "sends_messages", False):
        try:
            contexts = [backend.chat_context(messages) for messages in conversations]
        except ValueError:
            contexts = None
    if contexts is not None:
        requests = [GenerationRequest(context=c, max_gen_toks=max_new_tokens) for c in contexts]
        try:
            return [r.text for r in backend.generate_until(requests, progress=progress)]
        except Exception as exc:  # noqa: BLE001 - recorded per judgment, never a crash
            return [exc] * len(conversations)
    out: list[str | BaseException] = []
    for messages in conversations:
        try:
            out.append(backend.chat(messages, {"max_new_tokens": max_new_tokens, "temperature": 0.0}))
        except Exception as exc:  # noqa: BLE001 - a timeout or an endpoint error fails this judgment only
            out.append(exc)
    return out


def judge_pairs(
    backend: Backend,
    protocol: JudgeProtocol,
    pairs: Sequence[PairItem],
    *,
    cache: JudgmentCache | None = None,
    token_budget: int | None = None,
    share_by: Callable[[PairItem, str], Hashable] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Judgment]:
    """Judge every pair in both orders.

    Parameters
    ----------
    backend : Backend
        The judge.
    protocol : JudgeProtocol
        A pairwise protocol.
    pairs : sequence of PairItem, length n
    cache : JudgmentCache, optional
        Judgments found here are not recomputed (``cached=True``); new successful ones are saved.
    token_budget : int, optional
        Padded tokens per forward pass for log-prob verdicts (default: 1024 on CPU, 65536 on GPU).
    share_by : callable(pair, order) -> hashable, optional
        Log-prob prompts with the same key run their common stem once (default: the pair id, so the
        two orders of a pair share the question). A judge run keys by (instruction, order): every
        model's "ab" prompt then shares the question and the baseline's answer.
    progress : callable(done, total), optional

    Returns
    -------
    list of Judgment, length 2n
        ``[pair 0 ab, pair 0 ba, pair 1 ab, ...]``.
    """
    if protocol.kind != "pairwise":
        raise ValueError(f"protocol {protocol.name!r} grades single answers; judge_pairs needs a pairwise protocol")
    prefix = protocol.verdict.prefix if protocol.verdict.method == "logprob" else None
    slots = []
    for item in pairs:
        for order in ORDERS:
            messages = order_messages(protocol, item, order)
            key = share_by(item, order) if share_by else item.pair_id
            slots.append((item.pair_id, order, messages, prompt_sha256(messages, prefix), key))
    found = cache.lookup(s[3] for s in slots) if cache is not None else {}
    results: list[Judgment | None] = [None] * len(slots)
    todo = []
    for i, (pair_id, order, _, sha, _) in enumerate(slots):
        if sha in found:
            results[i] = Judgment(pair_id=pair_id, order=order, prompt_sha256=sha, status="ok", cached=True, **found[sha])
        else:
            todo.append(i)
    if todo:
        run = _judge_logprob if protocol.verdict.method == "logprob" else _judge_generated
        fresh = run(backend, protocol, [slots[i] for i in todo], token_budget=token_budget, progress=progress)
        for i, judgment in zip(todo, fresh):
            results[i] = judgment
        if cache is not None:
            cache.save(fresh)
    return results  # type: ignore[return-value]


def _failed(slot, error: str) -> Judgment:
    return Judgment(pair_id=slot[0], order=slot[1], prompt_sha256=slot[3], status="failed", error=error)


def _judge_logprob(backend, protocol, slots, *, token_budget, progress) -> list[Judgment]:
    model, tokenizer = getattr(backend, "model", None), getattr(backend, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(
            f"the log-prob protocol {protocol.name!r} needs the judge's tokenizer to build its prompts: the "
            f"hf and vllm backends have it; for the {backend.name!r} backend pass tokenizer=DIR "
            "(openai), or use a generate protocol"
        )
    token_ids = protocol.verdict_token_ids(tokenizer)
    window = getattr(backend, "max_length", None)
    out: list[Judgment | None] = [None] * len(slots)
    prompts, keep = [], []
    for i, slot in enumerate(slots):
        ids = prompt_token_ids(tokenizer, slot[2], protocol.verdict.prefix)
        if window and len(ids) > window:
            out[i] = _failed(slot, f"the judge prompt has {len(ids)} tokens, more than the judge's window ({window})")
        else:
            prompts.append(ids)
            keep.append(i)
    if prompts and callable(getattr(model, "get_output_embeddings", None)):  # a local transformers model
        if token_budget is None:
            device = getattr(backend, "device", None)
            token_budget = CPU_TOKEN_BUDGET if getattr(device, "type", "cpu") == "cpu" else 65536
        groups = [slots[i][4] for i in keep]
        pad = getattr(backend, "pad_token_id", None) or 0
        found = p_first_batched(model, prompts, token_ids, groups=groups, token_budget=token_budget, pad_id=pad)
    elif prompts:  # any other backend: the two verdict tokens' log-probabilities, per prompt
        found = [p_first_of(r) for r in backend.next_token_logprobs(prompts, token_ids)]
    for i, p in zip(keep, found if prompts else []):
        slot = slots[i]
        if isinstance(p, Exception):
            out[i] = _failed(slot, _short(p))
        else:
            out[i] = Judgment(pair_id=slot[0], order=slot[1], prompt_sha256=slot[3], status="ok", p_first=float(p))
    if progress:
        progress(len(slots), len(slots))
    return out  # type: ignore[return-value]


def p_first_of(logprobs: Sequence[float] | Exception) -> float | Exception:
    """``p(A) / (p(A) + p(B))`` from the two log-probabilities (a sigmoid of their difference)."""
    if isinstance(logprobs, Exception):
        return logprobs
    log_a, log_b = logprobs
    if math.isnan(log_a) or math.isnan(log_b) or max(log_a, log_b) == -math.inf or max(log_a, log_b) > 1e-3:
        return ValueError(f"the judge reported impossible verdict log-probabilities: {log_a}, {log_b}")
    return 1.0 / (1.0 + math.exp(min(log_b - log_a, 700.0)))


def _judge_generated(backend, protocol, slots, *, token_budget, progress) -> list[Judgment]:
    texts = generate_texts(backend, [s[2] for s in slots], max_new_tokens=protocol.verdict.max_new_tokens,
                           progress=progress)
    out = []
    for slot, text in zip(slots, texts):
        if isinstance(text, BaseException):
            out.append(_failed(slot, _short(text)))
            continue
        try:
            verdict, winner, weight = parse_generated(protocol, text)
        except ValueError as exc:
            out.append(Judgment(pair_id=slot[0], order=slot[1], prompt_sha256=slot[3], status="failed",
                                raw=text, error=_short(exc)))
            continue
        out.append(Judgment(pair_id=slot[0], order=slot[1], prompt_sha256=slot[3], status="ok",
                            verdict=verdict, winner=winner, weight=weight, raw=text))
    return out


# -- families: which pairwise protocol compares which turn -------------------------------------------
REFERENCE_CATEGORIES = ("math", "reasoning", "coding")  # MT-Bench's reference-guided categories
PAIRWISE_ROLES = ("single", "multi", "reference", "reference_multi")


@dataclass(frozen=True)
class PairwiseProtocols:
    """A family of pairwise protocols (FastChat's pairwise MT-Bench judge): ``single`` compares the
    answers to a question's first turn, ``multi`` both conversations (judging the second answers);
    ``reference`` and ``reference_multi`` do the same against reference answers, for questions whose
    category is in ``reference_categories`` and that have references. A missing reference member falls
    back to the plain one; a family without ``multi`` compares one-turn questions only."""

    single: JudgeProtocol
    multi: JudgeProtocol | None = None
    reference: JudgeProtocol | None = None
    reference_multi: JudgeProtocol | None = None
    reference_categories: tuple[str, ...] = REFERENCE_CATEGORIES

    def __post_init__(self) -> None:
        roles = (("single", 1, False), ("multi", 2, False), ("reference", 1, True), ("reference_multi", 2, True))
        check_family(self, roles, kind="pairwise", what="pairwise", missing="a pairwise family needs its one-turn "
                     "protocol", verb="compares")  # fmt: skip

    @property
    def members(self) -> dict[str, JudgeProtocol]:
        return {role: p for role in PAIRWISE_ROLES if (p := getattr(self, role)) is not None}

    @property
    def sha256(self) -> str:
        """Over the four protocols' hashes (None for a missing one) and the reference categories."""
        content = {"protocols": [p.sha256 if (p := getattr(self, r)) is not None else None for r in PAIRWISE_ROLES],
                   "reference_categories": sorted(c.strip().lower() for c in self.reference_categories)}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def guided(self, category: str) -> bool:
        return category.strip().lower() in {c.strip().lower() for c in self.reference_categories}

    def pick(self, turn: int, *, guided: bool) -> JudgeProtocol:
        """The protocol comparing ``turn`` (1 or 2); ValueError when the family has none for turn 2."""
        plain, with_ref = (self.single, self.reference) if turn == 1 else (self.multi, self.reference_multi)
        if plain is None:
            raise ValueError(f"the protocol {self.single.name!r} compares one turn only; a two-turn question needs a "
                             "family with a two-turn pairwise protocol")  # fmt: skip
        return with_ref if guided and with_ref is not None else plain


def cache_for(cache: JudgmentCache | None, protocol: JudgeProtocol) -> JudgmentCache | None:
    """The cache a family's member writes to: the family cache's store and judge, under its protocol
    hash combined with the member's (unless they are the same), so a changed member never hits a stale entry."""
    if cache is None or cache.protocol_sha256 == protocol.sha256:
        return cache
    combined = hashlib.sha256(f"{cache.protocol_sha256}:{protocol.sha256}".encode()).hexdigest()
    return JudgmentCache(cache.store, judge_key=cache.judge_key, protocol_sha256=combined)


def judge_assigned_pairs(backend: Backend, assigned: Sequence[tuple[JudgeProtocol, PairItem]], *,
                         cache: JudgmentCache | None = None, token_budget: int | None = None,
                         share_by: Callable[[PairItem, str], Hashable] | None = None) -> list[Judgment]:  # fmt: skip
    """:func:`judge_pairs` where each pair names its own protocol (a family's members): the pairs are
    judged in one call per protocol, each with :func:`cache_for`; judgments in the pairs' order (two each)."""
    groups: dict[str, list[int]] = {}
    protocols: dict[str, JudgeProtocol] = {}
    for index, (protocol, _) in enumerate(assigned):
        groups.setdefault(protocol.sha256, []).append(index)
        protocols[protocol.sha256] = protocol
    out: list[Judgment | None] = [None] * (2 * len(assigned))
    for sha, indices in groups.items():
        found = judge_pairs(backend, protocols[sha], [assigned[i][1] for i in indices],
                            cache=cache_for(cache, protocols[sha]), token_budget=token_budget, share_by=share_by)
        for position, index in enumerate(indices):
            out[2 * index : 2 * index + 2] = found[2 * position : 2 * position + 2]
    return out  # type: ignore[return-value]
