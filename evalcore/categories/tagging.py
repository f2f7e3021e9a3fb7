"""Tag prompts with a category protocol through any evalcore backend, with a cache.

::

    from evalcore.categories import load_category_protocol, tag_prompts
    from evalcore.models import load_backend

    tagger = load_backend("hf", path="/models/SmolLM2-135M-Instruct", dtype="float32")
    tags = tag_prompts(tagger, load_category_protocol("coding"), ["Write a merge sort in C."])

Log-prob protocols read P(yes) / (P(yes) + P(no)) after each criterion's prefix: batched with shared
stems on a local transformers model (``hf``: every criterion of one prompt shares the prompt, every
prompt the system message), through :meth:`~evalcore.models.base.Backend.next_token_logprobs` elsewhere
(``vllm``; ``openai`` given ``tokenizer=DIR``). Generate protocols work with every backend: batched
through ``generate_until`` where the backend renders chat prompts (``hf``, ``vllm``), one chat request
per prompt otherwise (``openai``). A tag whose call fails (a timeout, an answer missing a criterion, a
prompt longer than the tagger's window) comes back with ``status="failed"`` and the error; only
successful tags are cached, so a re-run retries the failed ones and costs nothing for the rest.

Cache keys are (tagger key, protocol sha256, prompt sha256): the tagger key is the weights hash and
dtype (:func:`evalcore.judging.judge_key`), the prompt sha256 the SHA-256 of the prompt's UTF-8 text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from evalcore.categories.protocol import CategoryProtocol
from evalcore.judging.cache import JudgmentStore, sha256_text
from evalcore.judging.judge import CPU_TOKEN_BUDGET, generate_texts, judge_key
from evalcore.judging.logprob import p_first_batched, prompt_token_ids
from evalcore.models.base import Backend

MAX_ERROR_CHARS = 500
MAX_RAW_CHARS = 4000
MAX_PROMPT_CHARS = 200_000  # longer prompts fail their tag (a window would cut them in any case)


def tagger_key(backend: Backend) -> str:
    """What identifies the tagger in cache keys and on every tag (weights hash and dtype, or an
    endpoint's model name and URL): the judges' key."""
    return judge_key(backend)


def prompt_sha256(prompt: str) -> str:
    """SHA-256 (hex) of a prompt's UTF-8 text: the cache key of its tags."""
    return sha256_text(prompt)


@dataclass(frozen=True)
class Tag:
    """One prompt's tag under one protocol.

    ``value``: in the category (``score >= threshold``); ``score``: criteria answered yes; ``criteria``:
    each criterion's answer; ``p_yes``: each criterion's P(yes) (log-prob protocols); ``raw``: the
    generated answer (generate protocols); ``cached``: read from the cache, no model call.
    """

    prompt_sha256: str
    category: str
    status: str
    value: bool | None = None
    score: int | None = None
    criteria: dict = field(default_factory=dict)
    p_yes: dict = field(default_factory=dict)
    raw: str = ""
    error: str = ""
    cached: bool = False
    tagger: str = ""
    protocol: str = ""
    protocol_version: str = ""
    protocol_sha256: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict:
        return asdict(self)


class TagCache:
    """Tags of one tagger under one protocol, keyed by prompt sha256, over a judgment store
    (:class:`~evalcore.judging.MemoryStore`, :class:`~evalcore.judging.SqliteStore` or a site's rows)."""

    def __init__(self, store: JudgmentStore, *, tagger: str, protocol_sha256: str) -> None:
        if not tagger or not protocol_sha256:
            raise ValueError("a tag cache needs the tagger key and the protocol hash")
        self.store, self.tagger, self.protocol_sha256 = store, tagger, protocol_sha256

    def key(self, sha: str) -> str:
        return f"tag:{self.tagger}:{self.protocol_sha256}:{sha}"

    def lookup(self, shas: Sequence[str]) -> dict[str, dict]:
        unique = list(dict.fromkeys(shas))
        found = self.store.get_many([self.key(s) for s in unique])
        return {s: found[self.key(s)] for s in unique if self.key(s) in found}

    def save(self, tags: Sequence[Tag]) -> None:
        items = {self.key(t.prompt_sha256): _stored(t) for t in tags if t.ok and not t.cached}
        if items:
            self.store.put_many(items)


def _stored(tag: Tag) -> dict:
    return {
        "value": tag.value,
        "score": tag.score,
        "criteria": tag.criteria,
        "p_yes": tag.p_yes,
        "raw": tag.raw,
    }


def _short(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:MAX_ERROR_CHARS]


def tag_prompts(
    backend: Backend,
    protocol: CategoryProtocol,
    prompts: Sequence[str],
    *,
    cache: TagCache | None = None,
    token_budget: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Tag]:
    """Tag every prompt.

    Parameters
    ----------
    backend : Backend
        The tagger.
    protocol : CategoryProtocol
    prompts : sequence of str, length n
        Identical prompts are tagged once.
    cache : TagCache, optional
        Tags found here are not recomputed (``cached=True``); new successful ones are saved.
    token_budget : int, optional
        Padded tokens per forward pass for log-prob protocols on ``hf`` (default 4096 on CPU, 65536 on GPU).
    progress : callable(done, total), optional

    Returns
    -------
    list of Tag, length n, in the order of ``prompts``.
    """
    if cache is not None and cache.protocol_sha256 != protocol.sha256:
        raise ValueError("the tag cache was made for another protocol")
    identity = {"tagger": tagger_key(backend), "protocol": protocol.name, "protocol_version": protocol.version,
                "protocol_sha256": protocol.sha256, "category": protocol.category}  # fmt: skip
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, str):
            raise ValueError(f"prompt {index + 1} is a {type(prompt).__name__}, not a string")
    shas = [prompt_sha256(p) for p in prompts]
    found = cache.lookup(shas) if cache is not None else {}
    todo = list(dict.fromkeys(s for s in shas if s not in found))
    text_of = dict(zip(shas, prompts))
    fresh: dict[str, Tag] = {}
    if todo:
        run = _tag_logprob if protocol.method == "logprob" else _tag_generated
        for sha, tag in zip(todo, run(backend, protocol, [text_of[s] for s in todo], token_budget=token_budget,
                                      progress=progress)):  # fmt: skip
            fresh[sha] = Tag(prompt_sha256=sha, **identity, **tag)
        if cache is not None:
            cache.save(list(fresh.values()))
    out = []
    for sha in shas:
        if sha in fresh:
            out.append(fresh[sha])
        else:
            stored = found[sha]
            out.append(Tag(prompt_sha256=sha, status="ok", cached=True, **identity,
                           **{k: stored.get(k) for k in ("value", "score", "criteria", "p_yes", "raw")}))  # fmt: skip
    return out


def _verdict(protocol: CategoryProtocol, answers: dict[str, bool], **extra) -> dict:
    score = sum(1 for c in protocol.criteria if answers[c.name])
    return {
        "status": "ok",
        "value": score >= protocol.threshold,
        "score": score,
        "criteria": answers,
        **extra,
    }


def _failed(error, **extra) -> dict:
    return {"status": "failed", "error": _short(error), **extra}


def _tag_logprob(
    backend, protocol: CategoryProtocol, prompts: list[str], *, token_budget, progress
) -> list[dict]:
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(
            f"the log-prob category protocol {protocol.name!r} needs the tagger's tokenizer: the hf and vllm "
            f"backends have it; for the {backend.name!r} backend pass tokenizer=DIR (openai), or use a generate protocol"
        )
    ids = []
    for label in ("yes", "no"):
        encoded = tokenizer.encode(getattr(protocol, label), add_special_tokens=False)
        if not encoded:
            raise ValueError(f"protocol {protocol.name!r}: the {label} answer encodes to no token")
        ids.append(int(encoded[0]))
    if ids[0] == ids[1]:
        raise ValueError(f"protocol {protocol.name!r}: the yes and no answers share their first token")
    window = getattr(backend, "max_length", None)
    out: list[dict | None] = [None] * len(prompts)
    rows, owners = [], []  # one row per (prompt, criterion)
    for i, prompt in enumerate(prompts):
        if len(prompt) > MAX_PROMPT_CHARS:
            out[i] = _failed(f"the prompt has {len(prompt)} characters, more than {MAX_PROMPT_CHARS}")
            continue
        messages = protocol.messages(prompt)
        mine = [prompt_token_ids(tokenizer, messages, c.prefix or f"{c.name}:") for c in protocol.criteria]
        longest = max(len(r) for r in mine)
        if window and longest > window:
            out[i] = _failed(
                f"the tagger prompt has {longest} tokens, more than the tagger's window ({window})"
            )
            continue
        rows += mine
        owners.append(i)
    model = getattr(backend, "model", None)
    if rows and callable(getattr(model, "get_output_embeddings", None)):  # a local transformers model
        if token_budget is None:
            device = getattr(backend, "device", None)
            token_budget = CPU_TOKEN_BUDGET if getattr(device, "type", "cpu") == "cpu" else 65536
        groups = [owners[k // len(protocol.criteria)] for k in range(len(rows))]
        pad = getattr(backend, "pad_token_id", None) or 0
        p_yes = [float(p) for p in p_first_batched(model, rows, (ids[0], ids[1]), groups=groups,
                                                    token_budget=token_budget, pad_id=pad)]  # fmt: skip
    elif rows:
        p_yes = [_p_yes(r) for r in backend.next_token_logprobs(rows, ids)]
    else:
        p_yes = []
    width = len(protocol.criteria)
    for k, i in enumerate(owners):
        found = p_yes[k * width : (k + 1) * width]
        errors = [p for p in found if isinstance(p, Exception)]
        if errors:
            out[i] = _failed(errors[0])
            continue
        chances = {c.name: round(p, 6) for c, p in zip(protocol.criteria, found)}
        out[i] = _verdict(protocol, {name: p > 0.5 for name, p in chances.items()}, p_yes=chances)
    if progress:
        progress(len(prompts), len(prompts))
    return out  # type: ignore[return-value]


def _p_yes(logprobs) -> float | Exception:
    if isinstance(logprobs, Exception):
        return logprobs
    log_yes, log_no = logprobs
    if (
        math.isnan(log_yes)
        or math.isnan(log_no)
        or max(log_yes, log_no) == -math.inf
        or max(log_yes, log_no) > 1e-3
    ):
        return ValueError(f"the tagger reported impossible answer log-probabilities: {log_yes}, {log_no}")
    return 1.0 / (1.0 + math.exp(min(log_no - log_yes, 700.0)))


def parse_criteria(protocol: CategoryProtocol, text: str) -> dict[str, bool]:
    """Each criterion's yes/no from a generated answer: the lines ``<name>: yes|no`` (any case, markdown
    emphasis ignored). A criterion with no such line, or with both answers, raises ValueError."""
    cleaned = text.replace("*", "").replace("`", "")
    answers = {}
    for c in protocol.criteria:
        said = {
            m.lower()
            for m in re.findall(rf"(?im)^[\s>\-\d.)]*{re.escape(c.name)}\s*[:=]\s*(yes|no)\b", cleaned)
        }
        if not said:
            raise ValueError(f"the tagger's answer has no line '{c.name}: yes' or '{c.name}: no'")
        if len(said) > 1:
            raise ValueError(f"the tagger's answer says both yes and no for {c.name}")
        answers[c.name] = said == {"yes"}
    return answers


def _tag_generated(
    backend, protocol: CategoryProtocol, prompts: list[str], *, token_budget, progress
) -> list[dict]:
    out: list[dict | None] = [None] * len(prompts)
    conversations, keep = [], []
    for i, prompt in enumerate(prompts):
        if len(prompt) > MAX_PROMPT_CHARS:
            out[i] = _failed(f"the prompt has {len(prompt)} characters, more than {MAX_PROMPT_CHARS}")
            continue
        messages = protocol.messages(prompt)
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + protocol.generate_instructions()}
        conversations.append(messages)
        keep.append(i)
    texts = generate_texts(backend, conversations, max_new_tokens=protocol.max_new_tokens, progress=progress)
    for i, text in zip(keep, texts):
        if isinstance(text, BaseException):
            out[i] = _failed(text)
            continue
        try:
            out[i] = _verdict(protocol, parse_criteria(protocol, text), raw=text[:MAX_RAW_CHARS])
        except ValueError as exc:
            out[i] = _failed(exc, raw=text[:MAX_RAW_CHARS])
    return out  # type: ignore[return-value]
