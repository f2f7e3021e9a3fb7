"""Per-token log-probabilities of a prompt for a transformers backend (OpenAI's legacy ``logprobs``
layout, as a completions server returns them for ``echo: true``).

The prompt is either text (tokenised without special tokens, BOS first when the backend adds it;
``tokens`` are the text's pieces and ``text_offset`` their character offsets) or token ids (scored
as given; each id's piece is that id decoded alone). The first token has no log-probability
(``None``): nothing precedes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalcore.models.scoring import run_base

LOGIT_ROWS = 256  # positions pushed through the output layer at once


def encode_with_offsets(backend, text: str) -> tuple[list[int], list[str], list[int]]:
    """(ids, pieces, character offsets) of ``text``; BOS first when the backend adds it."""
    tokenizer = backend.tokenizer
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    offsets = [start for start, _ in encoded["offset_mapping"]]
    pieces = [text[start:end] for start, end in encoded["offset_mapping"]]
    if getattr(backend, "add_bos_token", False) and tokenizer.bos_token_id is not None:
        ids, offsets, pieces = [tokenizer.bos_token_id, *ids], [0, *offsets], ["", *pieces]
    return ids, pieces, offsets


def pieces_of_ids(backend, ids: Sequence[int]) -> tuple[list[str], list[int]]:
    """(pieces, offsets) of token ids: each id decoded alone, offsets their running lengths."""
    pieces = [backend.tokenizer.decode([i]) for i in ids]
    offsets, position = [], 0
    for piece in pieces:
        offsets.append(position)
        position += len(piece)
    return pieces, offsets


def prompt_token_logprobs(backend, prompt: str | Sequence[int], *, top_n: int,
                          continuation_ids: Sequence[int] = ()) -> dict:  # fmt: skip
    """``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}`` of ``prompt`` followed by
    ``continuation_ids`` (generated tokens: each decoded alone, offsets running on after the prompt).

    ``top_logprobs[i]`` maps the ``top_n`` likeliest pieces at position ``i`` to their log-probabilities
    (``None`` when ``top_n`` is 0 and for the first token). Raises ValueError when the prompt is longer
    than the model's window.
    """
    if isinstance(prompt, str):
        ids, pieces, offsets = encode_with_offsets(backend, prompt)
    else:
        ids = list(prompt)
        pieces, offsets = pieces_of_ids(backend, ids)
    if continuation_ids:
        extra, extra_offsets = pieces_of_ids(backend, continuation_ids)
        end = len(prompt) if isinstance(prompt, str) else sum(len(piece) for piece in pieces)
        ids, pieces = [*ids, *continuation_ids], [*pieces, *extra]
        offsets = [*offsets, *(end + offset for offset in extra_offsets)]
    if not ids:
        raise ValueError("the prompt is empty: there is no token to score")
    if len(ids) > backend.max_length:
        raise ValueError(
            f"the prompt is {len(ids)} tokens, longer than the model's {backend.max_length}-token window"
        )
    chosen, tops = _logprobs(backend, ids, top_n)
    return {"tokens": pieces, "token_logprobs": [None, *chosen], "top_logprobs": [None, *tops],
            "text_offset": offsets}  # fmt: skip


def _logprobs(backend, ids: list[int], top_n: int) -> tuple[list[float], list[dict | None]]:
    import torch

    model, tokenizer = backend.model, backend.tokenizer
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    chosen: list[float] = []
    tops: list[dict | None] = []
    if len(ids) < 2:
        return chosen, tops
    with torch.inference_mode():
        hidden, _ = run_base(base, input_ids=torch.tensor([ids], device=backend.device), use_cache=False)
        for start in range(0, len(ids) - 1, LOGIT_ROWS):
            stop = min(start + LOGIT_ROWS, len(ids) - 1)
            logprobs = torch.log_softmax(head(hidden[0, start:stop]).float(), dim=-1)
            targets = torch.tensor(ids[start + 1 : stop + 1], device=logprobs.device)
            chosen.extend(logprobs.gather(1, targets.view(-1, 1)).view(-1).tolist())
            if top_n > 0:
                values, indices = logprobs.topk(top_n, dim=-1)
                for row_values, row_indices in zip(values.tolist(), indices.tolist()):
                    tops.append({tokenizer.decode([i]): v for i, v in zip(row_indices, row_values)})
            else:
                tops.extend([None] * (stop - start))
    return chosen, tops
