"""One completions prompt through a backend: generated text, and for ``logprobs`` the per-token
log-probabilities in OpenAI's legacy layout (``tokens``, ``token_logprobs``, ``top_logprobs``,
``text_offset``), over the prompt and the generated text with ``echo``, over the generated text alone
without it. Token counts for ``usage`` come from the backend's tokenizer (0 when it has none)."""

from __future__ import annotations

from dataclasses import dataclass

from evalcore.cli.serve.validation import RequestError
from evalcore.models import GenerationRequest


@dataclass(frozen=True)
class Completion:
    """One choice (without its ``index``) and its token counts."""

    choice: dict
    prompt_tokens: int
    completion_tokens: int


def call(function, *args, **kwargs):
    """Run a model call; a ValueError from the backend is the client's fault (400)."""
    try:
        return function(*args, **kwargs)
    except ValueError as exc:
        raise RequestError(400, str(exc)) from None


def count_tokens(backend, text: str) -> int:
    encode = getattr(backend, "tok_encode", None)
    return len(encode(text)) if encode is not None and text else 0


def prompt_text(backend, prompt: str | list[int]) -> str:
    """A text prompt as is; token ids decoded (special tokens kept, so the text re-encodes to them)."""
    return prompt if isinstance(prompt, str) else backend.tokenizer.decode(prompt)


def complete(backend, prompt: str | list[int], settings: dict, *, echo: bool, logprobs: int | None,
             seed: int) -> Completion:  # fmt: skip
    """Generate ``settings["max_tokens"]`` tokens at most after ``prompt`` (none for 0)."""
    context = prompt_text(backend, prompt)
    text, reason, count = "", "length", 0
    if settings["max_tokens"] > 0:
        sampled = settings["temperature"] > 0
        request = GenerationRequest(
            context=context, until=settings["stop"], max_gen_toks=settings["max_tokens"], do_sample=sampled,
            temperature=settings["temperature"] if sampled else 0.0, top_p=settings["top_p"], seed=seed,
        )  # fmt: skip
        result = call(backend.generate_until, [request])[0]
        text, reason, count = result.text, result.finish_reason, result.num_tokens
    choice = {"text": context + text if echo else text, "logprobs": None, "finish_reason": reason}
    if logprobs is not None:
        generated = generated_ids(backend, text, count, stop=settings["stop"])
        choice["logprobs"] = scored_tokens(backend, prompt, generated, top_n=logprobs, echo=echo)
    n_prompt = len(prompt) if isinstance(prompt, list) else count_tokens(backend, prompt)
    return Completion(choice, n_prompt, count)


def generated_ids(backend, text: str, count: int, *, stop: tuple[str, ...]) -> list[int]:
    """The ids of ``count`` generated tokens whose text is ``text``: the text re-encoded, then, when
    tokens are missing and no stop string was asked for, the end-of-sequence token that ended the
    answer (a client reading ``echo`` + ``max_tokens: 1`` expects exactly one token after the prompt)."""
    ids = backend.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
    eos = getattr(backend, "eos_token_id", None)
    if len(ids) < count and not stop and eos is not None:
        ids = [*ids, *[eos] * (count - len(ids))]
    return ids


def scored_tokens(backend, prompt: str | list[int], generated: list[int], *, top_n: int, echo: bool) -> dict:
    """The ``logprobs`` object of a choice: the prompt's tokens (with ``echo``) and the generated ones."""
    score = getattr(backend, "prompt_token_logprobs", None)
    if score is None:
        raise RequestError(400, f"the {backend.name} backend cannot return prompt log-probabilities",
                           param="logprobs")  # fmt: skip
    scored = call(score, prompt, top_n=top_n, continuation_ids=generated)
    first = len(scored["tokens"]) - len(generated)  # where the generated tokens start
    keep = slice(0, None) if echo else slice(first, None)
    shift = 0 if echo or first >= len(scored["text_offset"]) else scored["text_offset"][first]
    return {
        "tokens": scored["tokens"][keep],
        "token_logprobs": scored["token_logprobs"][keep],
        "top_logprobs": scored["top_logprobs"][keep],
        "text_offset": [offset - shift for offset in scored["text_offset"][keep]],
    }
