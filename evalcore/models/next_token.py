"""Next-token log-probabilities of token-id prompts through an OpenAI-compatible ``/completions``
endpoint (what log-prob judge verdicts need from the ``openai`` backend).

One request per prompt: the prompt as token ids (so the server scores exactly the tokens the judge
built with the model's chat template), ``max_tokens: 1``, ``temperature: 0`` and ``logprobs: N``;
the answer's ``top_logprobs[0]`` maps the N likeliest next tokens to their log-probabilities (keys
are the tokens' text, or ``token_id:ID`` on servers started with ``--return-tokens-as-token-ids``).
A wanted token outside those N has no known probability: that prompt fails with an error saying so,
never a guess. The client needs the model's tokenizer (``tokenizer=DIR`` on the backend) to build
the prompt ids and to name the wanted tokens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from evalcore.models.endpoint import EndpointError, first_choice

DEFAULT_TOP_LOGPROBS = 20  # vLLM's server default cap (max_logprobs) and evalcore serve's


def load_tokenizer(path: str | os.PathLike):
    """The tokenizer saved in folder ``path`` (local files only: no hub download)."""
    from transformers import AutoTokenizer

    if not os.path.isdir(path):
        raise ValueError(f"tokenizer must be a folder with the judge model's tokenizer files, got {str(path)!r}")
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot load a tokenizer from {str(path)!r}: {exc}") from None


def token_keys(tokenizer, token_ids: Sequence[int]) -> list[tuple[str, str]]:
    """(text, ``token_id:ID``) of each id: the keys a server may use for it in ``top_logprobs``."""
    keys = [(tokenizer.decode([int(i)]), f"token_id:{int(i)}") for i in token_ids]
    texts = [text for text, _ in keys]
    if len(set(texts)) != len(texts):
        raise ValueError(f"the tokens {list(token_ids)} decode to the same text {texts}: a server's "
                         "top_logprobs cannot tell them apart")  # fmt: skip
    return keys


def read_top(body: dict, keys: list[tuple[str, str]], *, top_n: int, where: str) -> list[float]:
    """The log-probabilities of ``keys`` in the first generated position's ``top_logprobs``."""
    logprobs = first_choice(body).get("logprobs")
    tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
    top = tops[0] if isinstance(tops, list) and tops else None
    if not isinstance(top, dict):
        raise EndpointError(f"{where} returned no top_logprobs for the next token (it must support "
                            "the completions 'logprobs' field, as vLLM's server and evalcore serve do)")  # fmt: skip
    out = []
    for text, id_key in keys:
        value = top.get(text, top.get(id_key))
        if value is None:
            raise ValueError(
                f"the token {text!r} is not among the {len(top)} likeliest next tokens that {where} "
                f"returned (top_logprobs={top_n}): its probability is unknown; raise top_logprobs "
                "(up to the server's limit) or use a generate protocol"
            )
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            raise EndpointError(f"{where} returned a log-probability that is not a number: {value!r}") from None
    return out


def endpoint_next_token_logprobs(backend, prompts: Sequence[Sequence[int]], token_ids: Sequence[int], *,
                                 progress=None) -> list[list[float] | Exception]:  # fmt: skip
    """:meth:`evalcore.models.base.Backend.next_token_logprobs` for an ``OpenAIBackend``."""
    if backend.tokenizer is None:
        raise ValueError("next-token log-probabilities through the openai backend need the model's "
                         "tokenizer: pass tokenizer=DIR (a folder with its tokenizer files)")  # fmt: skip
    keys = token_keys(backend.tokenizer, token_ids)
    where = f"{backend.base_url}/completions"

    def one(ids: Sequence[int]) -> list[float] | Exception:
        payload = {"model": backend.model_name, "prompt": [int(i) for i in ids], "max_tokens": 1,
                   "temperature": 0.0, "logprobs": backend.top_logprobs}  # fmt: skip
        try:
            return read_top(backend._json("POST", "/completions", payload), keys, top_n=backend.top_logprobs,
                            where=where)  # fmt: skip
        except (EndpointError, ValueError) as exc:  # this prompt fails; the others go on
            return exc

    return backend._map(one, list(prompts), progress)
