"""Batched generation with a KV cache for the transformers backend, and chat streaming.

Rows of a batch may share a leading prefix (few-shot examples): it runs once and its cache is
copied to every row. The per-row remainders are left-padded *after* the prefix, with an
attention mask and explicit position ids, so every row sees exactly its own tokens at their own
positions. Finished rows (stop string, EOS or ``max_gen_toks``) leave the batch at once.
"""

from __future__ import annotations

import random
from collections.abc import Generator

from evalcore.models.base import ChatParams, GenerationRequest, GenerationResult, cut_at_stop
from evalcore.models.scoring import MIN_SHARED_PREFIX, common_prefix, run_base

MAX_GEN_ROWS_CPU = 16
# Draft tokens proposed per pass when one greedy row is left (prompt-lookup speculation). On the CPU
# a pass costs more with every token fed (SmolLM2-135M, one thread: 1 token 45 ms, 2: 62, 4: 71,
# 9: 82) while copied drafts are mostly accepted for 1-3 tokens: 4 costs ~10% less than 8 on BBH's
# and GSM8K's lone rows (docs/PERFORMANCE.md). The text is the same for any value.
SPECULATE_TOKENS = 4
LOOKUP_NGRAM = 3


def lookup_draft(history: list[int], *, max_tokens: int = SPECULATE_TOKENS, ngram: int = LOOKUP_NGRAM) -> list[int]:
    """Guess the next tokens by copying: find the latest earlier occurrence of the history's final
    n-gram (longest n first) and propose what followed it. Empty when nothing matches.

    Copying is how answers reuse numbers and names from the question, and how a degenerate
    generation repeats itself; a wrong guess costs nothing but the unused draft positions.
    """
    if max_tokens < 1:
        return []
    size = len(history)
    for n in range(min(ngram, size - 1), 0, -1):
        tail = history[size - n :]
        best: list[int] = []
        for start in range(size - n - 1, -1, -1):
            if history[start : start + n] == tail:
                follow = history[start + n : start + n + max_tokens]
                if len(follow) > len(best):
                    best = follow
                if len(best) == max_tokens:
                    break
        if best:
            return best
    return []


def _croppable(cache) -> bool:
    """Whether rejected draft positions can be dropped from ``cache`` (plain dynamic layers only)."""
    from transformers.cache_utils import DynamicCache

    if type(cache) is not DynamicCache or not hasattr(cache, "crop"):
        return False
    layers = getattr(cache, "layers", None)
    if layers is None:
        return True
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in layers)


def _pick_tokens(logits, rows, generators):
    """Next token per row: argmax, or a seeded sample with temperature and top-p."""
    import torch

    chosen = logits.argmax(dim=-1)
    for b, request in enumerate(rows):
        if not (request.do_sample and request.temperature > 0):
            continue
        probs = torch.softmax(logits[b].float() / request.temperature, dim=-1)
        if request.top_p < 1.0:
            sorted_probs, order = probs.sort(descending=True)
            keep = sorted_probs.cumsum(0) - sorted_probs < request.top_p
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
        chosen[b] = torch.multinomial(probs.cpu(), 1, generator=generators[b]).item()
    return chosen


def generate_batch(backend, rows, *, progress=None) -> list[GenerationResult]:
    """Generate for ``rows`` of (context ids, stop strings, GenerationRequest); results in order."""
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])
    max_rows = backend.batch_size if backend.batch_size != "auto" else MAX_GEN_ROWS_CPU
    if backend.device.type != "cpu" and backend.batch_size == "auto":
        max_rows = 64
    batches, current = [], []
    for index in order:
        ids, _, request = rows[index]
        longest = max(
            [len(rows[i][0]) + rows[i][2].max_gen_toks for i in current] + [len(ids) + request.max_gen_toks]
        )
        if current and (len(current) >= max_rows or longest * (len(current) + 1) > 2 * backend.token_budget):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    results: list[GenerationResult | None] = [None] * len(rows)
    for batch in batches:
        for index, result in zip(batch, _generate_one_batch(backend, [rows[i] for i in batch])):
            results[index] = result
        if progress is not None:
            progress(len(batch))
    return results  # type: ignore[return-value]


def _generate_one_batch(backend, rows) -> list[GenerationResult]:
    import torch

    model = backend.model
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    device = backend.device
    contexts = [ids for ids, _, _ in rows]
    size = len(rows)
    prefix = 0
    if size > 1:
        shared = min(common_prefix(contexts[0], c) for c in contexts)
        if shared >= MIN_SHARED_PREFIX:
            prefix = min(shared, min(len(c) for c in contexts) - 1)
    generators = [torch.Generator().manual_seed(int(r.seed)) for _, _, r in rows]
    requests = [r for _, _, r in rows]
    answers = _Answers(backend, rows)
    take, generated, finished = answers.take, answers.generated, answers.finished
    with torch.inference_mode():
        logits, cache, mask, next_position = _prefill(backend, base, head, contexts, prefix)
        active = list(range(size))
        speculate = _croppable(cache)
        while active:
            tokens = _pick_tokens(logits, [requests[i] for i in active], [generators[i] for i in active])
            keep = [slot for slot, row in enumerate(active) if not take(row, int(tokens[slot]))]
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                mask = mask[keep]
                next_position = next_position[keep]
                tokens = tokens[keep]
                active = [active[s] for s in keep]
            row = active[0]
            draft = []
            if speculate and len(active) == 1 and not (requests[row].do_sample and requests[row].temperature > 0):
                room = backend.max_length - int(next_position[0]) - 1
                draft = lookup_draft(contexts[row] + generated[row], max_tokens=min(SPECULATE_TOKENS, room))
            feed = torch.tensor([[int(tokens[0]), *draft]]) if draft else tokens.view(-1, 1)
            width = feed.shape[1]
            mask = torch.cat([mask, torch.ones((len(active), width), dtype=torch.long)], dim=1)
            hidden, cache = run_base(
                base,
                input_ids=feed.to(device),
                attention_mask=mask.to(device),
                position_ids=(next_position.view(-1, 1) + torch.arange(width)).to(device),
                cache=cache,
                use_cache=True,
            )
            if not draft:
                next_position = next_position + 1
                logits = head(hidden[:, -1]).float()
                continue
            # Prompt-lookup speculation for a lone greedy row: one pass scores the fed token and the
            # draft; draft tokens are kept while they equal the model's own greedy choice, so the text
            # is what one-token steps would give, in fewer passes over the weights.
            predicted = head(hidden[0]).float().argmax(dim=-1).tolist()
            accepted = 0
            while accepted < len(draft) and draft[accepted] == predicted[accepted]:
                if take(row, draft[accepted]):
                    return finished  # type: ignore[return-value]
                accepted += 1
            rejected = len(draft) - accepted
            if rejected:
                cache.crop(-rejected)
                mask = mask[:, : mask.shape[1] - rejected]
            next_position = next_position + 1 + accepted
            logits = head(hidden[:, accepted]).float()
    return finished  # type: ignore[return-value]


class _Answers:
    """The tokens generated for each row of a batch, and each row's result once it is finished."""

    def __init__(self, backend, rows) -> None:
        self.backend, self.rows = backend, rows
        self.generated: list[list[int]] = [[] for _ in rows]
        self.finished: list[GenerationResult | None] = [None] * len(rows)

    def take(self, row: int, token: int) -> bool:
        """Append ``token`` to ``row``; True when that finishes the row."""
        _, until, request = self.rows[row]
        generated = self.generated[row]
        generated.append(token)
        cut, stopped = cut_at_stop(self.backend.tok_decode(generated), until)
        if stopped or token == self.backend.eos_token_id:
            self.finished[row] = GenerationResult(cut, len(generated), "stop")
        elif len(generated) >= request.max_gen_toks:
            self.finished[row] = GenerationResult(cut, len(generated), "length")
        return self.finished[row] is not None


def _prefill(backend, base, head, contexts: list[list[int]], prefix: int):
    """Run the prompts (left-padded; a shared ``prefix`` once, its cache repeated for every row).

    Returns (next-token logits, KV cache, attention mask, next position of each row).
    """
    import torch

    device, size = backend.device, len(contexts)
    cache = None
    if prefix:
        shared = torch.tensor([contexts[0][:prefix]], device=device)
        _, cache = run_base(base, input_ids=shared, use_cache=True)
        cache.batch_repeat_interleave(size)
    tails = [c[prefix:] for c in contexts]
    width = max(len(t) for t in tails)
    input_ids = torch.full((size, width), backend.pad_token_id, dtype=torch.long)
    mask = torch.zeros((size, prefix + width), dtype=torch.long)
    mask[:, :prefix] = 1
    positions = torch.zeros((size, width), dtype=torch.long)
    for b, tail in enumerate(tails):
        pad = width - len(tail)
        input_ids[b, pad:] = torch.tensor(tail)
        mask[b, prefix + pad :] = 1
        positions[b, pad:] = torch.arange(prefix, prefix + len(tail))
    next_position = torch.tensor([prefix + len(t) for t in tails])
    hidden, cache = run_base(
        base,
        input_ids=input_ids.to(device),
        attention_mask=mask.to(device),
        position_ids=positions.to(device),
        cache=cache,
        use_cache=True,
    )
    return head(hidden[:, -1]).float(), cache, mask, next_position


def _held_back(text: str, stops) -> int:
    """How many trailing characters might start a stop string (or an unfinished character)."""
    hold = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:k]):
                hold = max(hold, k)
                break
    if text.endswith("\ufffd"):
        hold = max(hold, 1)
    return hold


def stream_tokens(backend, ids: list[int], params: ChatParams) -> Generator[str, None, str]:
    """Yield text deltas generated after the prompt ``ids`` (one row, KV cache); return why it stopped:
    ``"length"`` when ``max_new_tokens`` ran out, ``"stop"`` at the end-of-sequence token or a stop string
    (what :class:`evalcore.models.base.ChatStream` reads)."""
    import torch

    if params.max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1")
    if len(ids) + params.max_new_tokens > backend.max_length:
        raise ValueError(
            f"the conversation is {len(ids)} tokens; with max_new_tokens={params.max_new_tokens} it exceeds "
            f"the model's {backend.max_length}-token window: shorten it or lower max_new_tokens"
        )
    model = backend.model
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    request = GenerationRequest(
        context="",
        do_sample=params.temperature > 0,
        temperature=params.temperature,
        top_p=params.top_p,
        seed=params.seed if params.seed is not None else random.SystemRandom().randrange(2**31),
    )
    generator = torch.Generator().manual_seed(int(request.seed))
    stops = tuple(params.stop)
    generated: list[int] = []
    emitted = 0
    with torch.inference_mode():
        cache = None
        step_input = torch.tensor([ids], device=backend.device)
        for _ in range(params.max_new_tokens):
            hidden, cache = run_base(base, input_ids=step_input, cache=cache, use_cache=True)
            logits = head(hidden[:, -1]).float()
            token = int(_pick_tokens(logits, [request], [generator])[0])
            if token == backend.eos_token_id:
                reason = "stop"
                break
            generated.append(token)
            text = backend.tok_decode(generated)
            cut, stopped = cut_at_stop(text, stops)
            if stopped:
                if len(cut) > emitted:
                    yield cut[emitted:]
                return "stop"
            safe = len(text) - _held_back(text, stops)
            if safe > emitted:
                yield text[emitted:safe]
                emitted = safe
            step_input = torch.tensor([[token]], device=backend.device)
        else:
            reason = "length"  # every one of max_new_tokens was generated: the answer was cut there
    text = backend.tok_decode(generated).rstrip("\ufffd")
    if len(text) > emitted:
        yield text[emitted:]
    return reason
