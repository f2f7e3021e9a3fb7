"""Log-prob verdicts on a transformers model: P(first) from the next-token distribution after a prefix.

The prompt is the judge tokenizer's chat template applied to ``[system (if any), user]`` with the
generation prompt, followed by the protocol's ``prefix`` tokenised without special tokens; then
``p_first = p(A) / (p(A) + p(B))`` from the softmax of the next-token logits, with each verdict
string's id the first id of ``tokenizer.encode(string, add_special_tokens=False)``.

Speed (:func:`p_first_batched`): identical prompts are computed once; the part every prompt shares
(the system message and the template's head) runs once and its KV cache serves every batch; the two
orders of one pair share their stem (the question and the first answer's header) and run it once;
rows are batched by a token budget, longest first; only the last position of each row, and only the
two verdict rows of the output layer, are computed (the ratio needs no 49k-way softmax).
``bench/judging.py`` compares this with one plain forward pass per judgment.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Hashable, Sequence

import numpy as np

# A prefix shared by every prompt (or by one pair's prompts) runs once when at least this long.
MIN_SHARED = 8


def prompt_token_ids(tokenizer, messages: list[dict], prefix: str) -> list[int]:
    """Token ids of the judge prompt: chat template (generation prompt on) + ``prefix`` ids."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the judge's tokenizer has no chat template (tokenizer_config.json chat_template)")
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    return ids + list(tokenizer.encode(prefix, add_special_tokens=False)) if prefix else ids


def p_first_plain(model, input_ids: Sequence[int], token_ids: tuple[int, int]) -> float:
    """The reference computation: one forward pass over the whole prompt, full logits, softmax."""
    import torch

    device = next(model.parameters()).device
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([list(input_ids)], device=device)).logits[0, -1].float()
        probs = torch.softmax(logits, dim=-1)
    p_a, p_b = float(probs[token_ids[0]]), float(probs[token_ids[1]])
    return p_a / (p_a + p_b)


def _common_prefix(rows: Sequence[Sequence[int]]) -> int:
    if not rows:
        return 0
    first, n = rows[0], min(len(r) for r in rows)
    for row in rows[1:]:
        i = 0
        while i < n and row[i] == first[i]:
            i += 1
        n = i
    return n


def _forward(base, input_ids, cache, **kwargs):
    """Run the decoder stack; transformers 5 calls the cache argument ``cache``, 4.x ``past_key_values``."""
    name = "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"
    out = base(input_ids=input_ids, **{name: cache}, use_cache=True, **kwargs)
    return out.last_hidden_state, getattr(out, name, None)  # not the alias: it warns on transformers 5


def _right_padded(rows: Sequence[Sequence[int]], pad_id: int):
    import torch

    width = max(1, max(len(r) for r in rows))
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        if row:
            out[b, : len(row)] = torch.tensor(list(row), dtype=torch.long)
            mask[b, : len(row)] = 1
    return out, mask


# A batch takes another group only while its padded tokens stay within this share of its real ones:
# padding is computed like any token, and on a CPU it costs more than batching saves.
MAX_PADDING = 0.1


def _plan(groups: list[list[int]], stems: list[int], lengths: list[int], budget: int,
          max_padding: float = MAX_PADDING) -> list[list[int]]:  # fmt: skip
    """Cut group indices into batches whose padded token cost fits ``budget``, with at most
    ``max_padding`` of it padding.

    Groups are taken longest rest first (the rests, the two answers of a pair, are most of a prompt;
    both orders' rests are about as long), then longest stem, so that neighbours pad little.
    """
    rest_of = [max(lengths[r] - stems[g] for r in groups[g]) for g in range(len(groups))]
    order = sorted(range(len(groups)), key=lambda g: (-rest_of[g], -stems[g]))
    batches, current = [], []
    stem_w = rest_w = rows = real = 0
    for g in order:
        new_stem, new_rest = max(stem_w, stems[g]), max(rest_w, rest_of[g])
        new_rows = rows + len(groups[g])
        new_real = real + stems[g] + sum(lengths[r] - stems[g] for r in groups[g])
        cost = (len(current) + 1) * new_stem + new_rows * new_rest
        if current and (cost > budget or cost > (1 + max_padding) * new_real):
            batches.append(current)
            current, new_stem, new_rest, new_rows = [], stems[g], rest_of[g], len(groups[g])
            new_real = stems[g] + sum(lengths[r] - stems[g] for r in groups[g])
        current.append(g)
        stem_w, rest_w, rows, real = new_stem, new_rest, new_rows, new_real
    if current:
        batches.append(current)
    return batches


def p_first_batched(
    model,
    prompts: Sequence[Sequence[int]],
    token_ids: tuple[int, int],
    *,
    groups: Sequence[Hashable] | None = None,
    token_budget: int = 8192,
    pad_id: int = 0,
) -> np.ndarray:
    """P(first) for every prompt, batched with shared prefixes (see the module docs).

    Parameters
    ----------
    model : transformers causal LM
    prompts : sequence of token-id lists, length n
        Each ends where the verdict token is predicted (prefix included).
    token_ids : (int, int)
        Ids of the A and B verdict tokens.
    groups : sequence of hashable, length n, optional
        Prompts with the same key (the two orders of one pair) share their common stem.
    token_budget : int
        Approximate padded tokens per forward pass.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    import torch

    if not prompts:
        return np.zeros(0)
    if any(len(p) == 0 for p in prompts):
        raise ValueError("an empty judge prompt cannot be scored")
    unique: dict[tuple[int, ...], int] = {}
    index = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
    rows = list(unique)
    keys = list(groups) if groups is not None else list(range(len(prompts)))
    row_group: dict[int, Hashable] = {}
    for key, row in zip(keys, index):
        row_group.setdefault(row, key)
    shared = _common_prefix(rows)
    shared = min(shared, min(len(r) for r in rows) - 1)
    shared = shared if shared >= MIN_SHARED else 0
    members: dict[Hashable, list[int]] = {}
    for row in range(len(rows)):
        members.setdefault(row_group[row], []).append(row)
    group_rows = list(members.values())
    tails = [r[shared:] for r in rows]
    stems = []
    for group in group_rows:
        stem = _common_prefix([tails[r] for r in group]) if len(group) > 1 else 0
        stem = min(stem, min(len(tails[r]) for r in group) - 1)
        stems.append(stem if stem >= MIN_SHARED else 0)
    base, head = model.base_model, model.get_output_embeddings()
    device = next(model.parameters()).device
    rows_w = head.weight[list(token_ids)].detach().double()
    bias = head.bias[list(token_ids)].detach().double() if getattr(head, "bias", None) is not None else None
    softcap = getattr(model.config, "final_logit_softcapping", None)
    out = np.zeros(len(rows))
    with torch.inference_mode():
        prefix_cache = None
        if shared:
            _, prefix_cache = _forward(base, torch.tensor([list(rows[0][:shared])], device=device), None)
        lengths = [len(t) for t in tails]
        for batch in _plan(group_rows, stems, lengths, token_budget):
            batch_rows = [r for g in batch for r in group_rows[g]]
            hidden = _batch_hidden(base, batch, group_rows, stems, tails, shared, prefix_cache, pad_id, device)
            out[batch_rows] = _two_token_p_first(hidden, rows_w, bias, softcap)
    return out[index]


def _two_token_p_first(hidden, rows_w, bias, softcap) -> np.ndarray:
    """``p(A) / (p(A) + p(B))`` of the full softmax, from the two verdict logits alone.

    The softmax's normaliser cancels in the ratio, so it equals ``sigmoid(logit_A - logit_B)``: only
    the two rows of the output layer are needed (in float64, so no precision is lost to the 49k-way
    softmax either).
    """
    import torch

    logits = hidden.double() @ rows_w.T
    if bias is not None:
        logits = logits + bias
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return torch.sigmoid(logits[:, 0] - logits[:, 1]).cpu().numpy()


def _batch_hidden(base, batch, group_rows, stems, tails, shared, prefix_cache, pad_id, device):
    """Last-position hidden states of every row of ``batch`` (groups), shape (rows, hidden)."""
    import torch

    n_groups = len(batch)
    rows = [r for g in batch for r in group_rows[g]]
    row_group = [i for i, g in enumerate(batch) for _ in group_rows[g]]
    cache = None
    if prefix_cache is not None:
        cache = copy.deepcopy(prefix_cache)
        cache.batch_repeat_interleave(n_groups)
    stem_w = max(stems[g] for g in batch)
    stem_mask = torch.zeros((n_groups, 0), dtype=torch.long)
    if stem_w:
        stem_ids, stem_mask = _right_padded([tails[group_rows[g][0]][: stems[g]] for g in batch], pad_id)
        positions = (shared + torch.arange(stem_ids.shape[1])).repeat(n_groups, 1)
        mask = torch.cat([torch.ones((n_groups, shared), dtype=torch.long), stem_mask], dim=1)
        _, cache = _forward(base, stem_ids.to(device), cache, attention_mask=mask.to(device),
                            position_ids=positions.to(device))
    if cache is not None and (stem_w or n_groups != len(rows)):
        cache.batch_select_indices(torch.tensor(row_group, device=device))
    rests = [tails[r][stems[batch[row_group[i]]] :] for i, r in enumerate(rows)]
    rest_ids, _ = _right_padded(rests, pad_id)
    mask = torch.cat(
        [torch.ones((len(rows), shared), dtype=torch.long), stem_mask[row_group],
         torch.ones((len(rows), rest_ids.shape[1]), dtype=torch.long)], dim=1,
    )  # fmt: skip
    starts = torch.tensor([shared + stems[batch[row_group[i]]] for i in range(len(rows))])
    positions = starts[:, None] + torch.arange(rest_ids.shape[1])[None, :]
    hidden, _ = _forward(base, rest_ids.to(device), cache, attention_mask=mask.to(device),
                         position_ids=positions.to(device))
    last = torch.tensor([len(r) - 1 for r in rests], device=device)
    return hidden[torch.arange(len(rows), device=device), last]
