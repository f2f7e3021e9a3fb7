"""Batched log-likelihood scoring for the transformers backend.

A *pair* is (context ids, continuation ids). The model input is ``(context + continuation)[:-1]``
truncated on the left to the window, and the continuation's log-probability is read from the
last ``len(continuation)`` positions, as in the harness.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from functools import lru_cache

# A batch whose rows share at least this many leading tokens runs the shared part once.
MIN_SHARED_PREFIX = 32
# Any batch whose rows all start with this many tokens (a task's description) runs them once.
MIN_BATCH_PREFIX = 8
# Within such a batch, rows sharing this many more tokens (one question's choices) share them too.
MIN_SHARED_STEM = 16
# Positions pushed through the output layer at once (bounds the (positions, vocab) logits).
LOGIT_CHUNK = 1024
MAX_ROWS_CPU = 64
# On CPU, rows sharing nothing go in passes of about this many tokens: activations small enough to stay
# in cache run faster than one big pass (measured: bench/engine_parity.py, docs/PERFORMANCE.md).
UNSHARED_TOKENS_CPU = 1024


def rolling_windows(tokens: Sequence[int], *, window: int, stride: int) -> list[tuple[list[int], list[int]]]:
    """Split ``tokens`` (prefix token first) into (context, targets) pairs scoring each token once.

    Targets come in chunks of ``stride`` tokens; each chunk gets as much preceding context as
    fits in ``window`` model inputs. ``stride == window`` reproduces the harness's disjoint
    windows (the first window starts at the prefix token; the last one is filled with context).

    Returns
    -------
    list of (context ids, target ids)
        Concatenated targets are ``tokens[1:]``; ``len(context) + len(targets) - 1 <= window``.
    """
    n = len(tokens)
    pairs = []
    start = 1
    while start < n:
        end = min(start + stride, n)
        first = max(0, end - 1 - window)
        pairs.append((list(tokens[first:start]), list(tokens[start:end])))
        start = end
    return pairs


def run_base(base, *, input_ids, cache=None, **kwargs):
    """Run the decoder stack; return (last hidden states, KV cache or None).

    transformers renamed ``past_key_values`` to ``cache`` (5.x); both spellings are handled.
    """
    name = _cache_argument(type(base))
    out = base(input_ids=input_ids, **{name: cache}, **kwargs)
    # Read the field under the name the model takes: on transformers 5, ``out.past_key_values`` is a
    # deprecated alias that logs a warning each process (seen when the cache is off and ``cache`` is None).
    return out.last_hidden_state, getattr(out, name, None)


_CACHE_ARGUMENT: dict[type, str] = {}


def _cache_argument(cls) -> str:
    if cls not in _CACHE_ARGUMENT:
        parameters = inspect.signature(cls.forward).parameters
        _CACHE_ARGUMENT[cls] = "cache" if "cache" in parameters else "past_key_values"
    return _CACHE_ARGUMENT[cls]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    limit = min(len(a), len(b))
    i = 0
    while i < limit and a[i] == b[i]:
        i += 1
    return i


def _batching_order(rows: list[tuple[int, ...]]) -> list[int]:
    """Row indices (``rows`` sorted lexicographically) in the order batches are cut from.

    Runs of rows sharing at least :data:`MIN_SHARED_PREFIX` leading tokens (few-shot examples, one
    question's multi-token choices) stay together so the shared part runs once; the other rows follow,
    longest first, so a batch pads its rows to nearly the same length.
    """
    groups: list[list[int]] = []
    for index in range(len(rows)):
        if groups and common_prefix(rows[groups[-1][0]], rows[index]) >= MIN_SHARED_PREFIX:
            groups[-1].append(index)
        else:
            groups.append([index])
    shared = [i for group in groups if len(group) > 1 for i in group]
    alone = sorted((group[0] for group in groups if len(group) == 1), key=lambda i: -len(rows[i]))
    return shared + alone


def _plan_batches(
    rows: list[tuple[int, ...]], order: list[int], *, budget: int, max_rows: int, unshared_budget: int | None = None
) -> list[list[int]]:
    """Cut ``order`` (row indices) into batches whose estimated token cost fits ``budget``
    (``unshared_budget`` for a batch whose rows share no long prefix)."""
    unshared_budget = budget if unshared_budget is None else unshared_budget
    batches: list[list[int]] = []
    current: list[int] = []
    shared = 0
    longest = 0
    for index in order:
        row = rows[index]
        if current:
            new_shared = min(shared, common_prefix(rows[current[0]], row))
            new_longest = max(longest, len(row))
            prefix = new_shared if new_shared >= MIN_SHARED_PREFIX else 0
            cost = prefix + (len(current) + 1) * (new_longest - prefix)
            memory = cost  # a shared prefix's cache is held once, not per row (see _read_only)
            # Keep a batch whose rows share a long prefix (the few-shot examples, or one question's
            # choices) together: a row that would break the sharing starts a new batch. One row alone
            # shares nothing yet.
            sharing_lost = len(current) > 1 and shared >= MIN_SHARED_PREFIX and new_shared < MIN_SHARED_PREFIX
            limit = budget if prefix else unshared_budget
            if len(current) < max_rows and cost <= limit and memory <= 2 * budget and not sharing_lost:
                current.append(index)
                shared, longest = new_shared, new_longest
                continue
            batches.append(current)
        current, shared, longest = [index], len(row), len(row)
    if current:
        batches.append(current)
    return batches


def score_pairs(backend, pairs, *, progress=None) -> list[tuple[float, bool, int]]:
    """(sum log-prob, is greedy, n tokens) for each (context ids, continuation ids) pair, in order."""
    import torch

    window = backend.max_length
    results: list[tuple[float, bool, int] | None] = [None] * len(pairs)
    by_input: dict[tuple[int, ...], list[tuple[int, tuple[int, ...]]]] = {}
    for index, (context, continuation) in enumerate(pairs):
        if not continuation:
            results[index] = (0.0, True, 0)
            continue
        if len(continuation) > window:
            raise ValueError(
                f"a continuation of {len(continuation)} tokens does not fit the {window}-token window"
            )
        whole = (list(context) + list(continuation))[-(window + 1) :]
        by_input.setdefault(tuple(whole[:-1]), []).append((index, tuple(continuation)))
    rows = sorted(by_input)
    need = [max(len(c) for _, c in by_input[row]) for row in rows]
    max_rows = backend.batch_size if backend.batch_size != "auto" else MAX_ROWS_CPU
    unshared = backend.token_budget
    if backend.device.type == "cpu":
        unshared = min(unshared, UNSHARED_TOKENS_CPU)
    batches = _plan_batches(
        rows, _batching_order(rows), budget=backend.token_budget, max_rows=max_rows, unshared_budget=unshared
    )
    batches.sort(key=lambda batch: -max(len(rows[i]) for i in batch))  # longest first
    model = backend.model
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    memo: dict = {}  # the latest shared prefix's cache, reused by the batches that share it
    with torch.inference_mode():
        for batch in batches:
            batch_rows = [rows[i] for i in batch]
            shared = min(common_prefix(batch_rows[0], r) for r in batch_rows)
            prefix = 0
            if len(batch_rows) > 1 and shared >= MIN_BATCH_PREFIX:
                prefix = min(shared - 1, min(len(rows[i]) - need[i] for i in batch))
            hidden, offsets = _hidden_states(base, batch_rows, prefix, backend, [need[i] for i in batch], memo)
            positions, targets, owners = [], [], []
            for b, row_index in enumerate(batch):
                length = len(rows[row_index])
                for request_index, continuation in by_input[rows[row_index]]:
                    n = len(continuation)
                    for k in range(n):
                        positions.append((b, length - n + k - offsets[b]))
                    targets.extend(continuation)
                    owners.append((request_index, n))
            logprobs, greedy = _target_logprobs(hidden, positions, targets, head, softcap)
            offset = 0
            for request_index, n in owners:
                results[request_index] = (
                    float(logprobs[offset : offset + n].sum()),
                    bool(greedy[offset : offset + n].all()),
                    n,
                )
                offset += n
            if progress is not None:
                progress(sum(len(by_input[rows[i]]) for i in batch))
    return results  # type: ignore[return-value]


def _stems(tails, needs) -> tuple[list[int], list[int]]:
    """Cluster consecutive (sorted) rows sharing >= MIN_SHARED_STEM tokens; (cluster of row, stem lengths)."""
    cluster_of, stems, members = [], [], []

    def close() -> None:
        common = min(common_prefix(tails[members[0]], tails[b]) for b in members)
        stems.append(min(common, min(len(tails[b]) - needs[b] for b in members)) if len(members) > 1 else 0)

    for b, tail in enumerate(tails):
        if members and common_prefix(tails[members[0]], tail) < MIN_SHARED_STEM:
            close()
            members = []
        members.append(b)
        cluster_of.append(len(stems))
    close()
    return cluster_of, stems


def _read_only(cache) -> bool:
    """Make a one-row prefix cache serve a whole batch without copying it, and never grow.

    Each layer then hands attention the prefix keys/values broadcast to the batch, joined with the
    batch's own, and keeps nothing: memory holds one copy of the prefix instead of one per row (a
    5-shot MMLU batch went from ~0.7 GB of cache to ~20 MB), and the same prefix serves every batch
    that shares it. False (cache untouched) where the cache is not made of plain dynamic layers.
    """
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return False
    layers = getattr(cache, "layers", None)
    if type(cache) is not DynamicCache or not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return False
    shared_class = _shared_prefix_layer_class()
    for layer in layers:
        layer.__class__ = shared_class
    cache.podium_read_only = True
    return True


@lru_cache(maxsize=1)
def _shared_prefix_layer_class():
    from transformers.cache_utils import DynamicLayer

    class SharedPrefixLayer(DynamicLayer):
        """A prefix's keys/values (batch of one) joined to each batch's own; stores nothing new."""

        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            batch = key_states.shape[0]
            keys = torch.cat([self.keys.expand(batch, -1, -1, -1), key_states], dim=-2)
            values = torch.cat([self.values.expand(batch, -1, -1, -1), value_states], dim=-2)
            return keys, values

    return SharedPrefixLayer


def _hidden_states(base, batch_rows, prefix: int, backend, needs, memo: dict | None = None):
    """Final hidden states after the shared ``prefix``: ``(hidden, offsets)``.

    ``hidden[b, j]`` is the state of token ``offsets[b] + j`` of row ``b``; every scored position
    is at or after ``offsets[b]``. With a shared prefix, rows that also share a stem (one question
    with several multi-token choices) run the stem once per cluster: stage one computes the stems
    on the prefix cache, stage two copies each cluster's cache to its rows and runs the remainders
    with an attention mask over the stem padding and explicit position ids.
    """
    import torch

    device = backend.device
    size = len(batch_rows)
    tails = [list(r[prefix:]) for r in batch_rows]
    cluster_of, stems = _stems(tails, needs) if prefix else ([0] * size, [0])

    def prefix_cache():
        shared = torch.tensor([batch_rows[0][:prefix]], device=device)
        return run_base(base, input_ids=shared, use_cache=True)[1]

    if max(stems) < MIN_SHARED_STEM:
        cache = None
        if prefix:
            key = tuple(batch_rows[0][:prefix])
            if memo is not None and memo.get("key") == key:
                cache = memo["cache"]
            else:
                cache = prefix_cache()
                if _read_only(cache) and memo is not None:
                    memo.clear()
                    memo.update(key=key, cache=cache)
            if not getattr(cache, "podium_read_only", False):
                cache.batch_repeat_interleave(size)
        # Right padding needs no attention mask in a causal model: padded positions come after
        # every scored position and are never attended to by them.
        padded = _right_padded(tails, backend.pad_token_id)
        hidden, _ = run_base(base, input_ids=padded.to(device), cache=cache, use_cache=cache is not None)
        return hidden, [prefix] * size
    cache = prefix_cache()
    clusters = len(stems)
    cache.batch_repeat_interleave(clusters)
    width = max(stems)
    first_rows = [cluster_of.index(c) for c in range(clusters)]
    stem_ids = _right_padded([tails[b][: stems[c]] or [backend.pad_token_id] for c, b in enumerate(first_rows)], backend.pad_token_id)
    stem_ids = stem_ids[:, :width] if stem_ids.shape[1] >= width else torch.nn.functional.pad(stem_ids, (0, width - stem_ids.shape[1]))
    stem_mask = torch.zeros((clusters, prefix + width), dtype=torch.long)
    stem_mask[:, :prefix] = 1
    for c, length in enumerate(stems):
        stem_mask[c, prefix : prefix + length] = 1
    stem_positions = (prefix + torch.arange(width)).repeat(clusters, 1)
    _, cache = run_base(
        base, input_ids=stem_ids.to(device), attention_mask=stem_mask.to(device),
        position_ids=stem_positions.to(device), cache=cache, use_cache=True,
    )  # fmt: skip
    cache.batch_select_indices(torch.tensor(cluster_of, device=device))
    rests = [tails[b][stems[cluster_of[b]] :] for b in range(size)]
    rest_ids = _right_padded(rests, backend.pad_token_id)
    mask = torch.cat([stem_mask[cluster_of], torch.ones((size, rest_ids.shape[1]), dtype=torch.long)], dim=1)
    positions = torch.stack([prefix + stems[cluster_of[b]] + torch.arange(rest_ids.shape[1]) for b in range(size)])
    hidden, _ = run_base(
        base, input_ids=rest_ids.to(device), attention_mask=mask.to(device),
        position_ids=positions.to(device), cache=cache, use_cache=True,
    )  # fmt: skip
    return hidden, [prefix + stems[cluster_of[b]] for b in range(size)]


def _right_padded(rows, pad_id):
    import torch

    width = max(len(r) for r in rows)
    padded = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for b, row in enumerate(rows):
        padded[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return padded


def _target_logprobs(hidden, positions, targets, head, softcap):
    """Log-probabilities of ``targets`` at ``positions`` and whether each is the argmax."""
    import torch

    rows = torch.tensor([p[0] for p in positions], device=hidden.device)
    cols = torch.tensor([p[1] for p in positions], device=hidden.device)
    target_ids = torch.tensor(targets, device=hidden.device)
    picked = hidden[rows, cols]
    logprobs, greedy = [], []
    for start in range(0, len(positions), LOGIT_CHUNK):
        logits = head(picked[start : start + LOGIT_CHUNK]).float()
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        logsm = torch.log_softmax(logits, dim=-1)
        chunk_targets = target_ids[start : start + LOGIT_CHUNK]
        logprobs.append(logsm.gather(1, chunk_targets[:, None])[:, 0])
        greedy.append(logsm.argmax(dim=-1) == chunk_targets)
    return torch.cat(logprobs).cpu().numpy(), torch.cat(greedy).cpu().numpy()
