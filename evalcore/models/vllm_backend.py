"""``vllm``: vLLM's offline engine (``vllm.LLM``) in-process on a GPU worker.

vllm is imported inside :class:`VLLMBackend` only, so this module imports anywhere; arguments are
checked before the import, so a bad folder or dtype is reported even where vllm is missing.

- tokenisation follows the hf backend (and the harness): the context/continuation split, the
  prefix token (BOS, else EOS) for an empty context, left truncation to the window;
- :meth:`VLLMBackend.loglikelihood` and :meth:`VLLMBackend.loglikelihood_rolling` send token-id
  prompts with ``SamplingParams(prompt_logprobs=1, max_tokens=1)`` and read each prompt token's
  log-probability and rank (rank 1 everywhere = greedy);
- :meth:`VLLMBackend.next_token_logprobs` (log-prob judge verdicts) scores each wanted token appended
  to the prompt the same way, so its probability is exact whatever its rank;
- :meth:`VLLMBackend.generate_until` uses ``stop`` strings; all requests go to vLLM in one call
  (it batches and schedules them itself);
- :meth:`VLLMBackend.stream_chat` renders the chat template and generates the whole answer, then
  yields it as one delta (the offline ``LLM`` has no token stream; for token-by-token streaming run
  vLLM's OpenAI server and use the ``openai`` backend).

Untested on a GPU in this repository's CI (no GPU, no vllm): written against vLLM's documented
``LLM`` / ``SamplingParams`` / ``TokensPrompt`` API (``RequestOutput.prompt_logprobs`` is a list with
``None`` first, then ``{token_id: Logprob(logprob, rank, decoded_token)}`` per prompt token).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

from evalcore.models.base import (
    Backend,
    ChatParams,
    GenerationRequest,
    GenerationResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    ModelIdentity,
    RollingRequest,
    RollingResult,
    cut_at_stop,
    validate_messages,
)
from evalcore.models.hf import hash_files, local_checkpoint
from evalcore.models.scoring import rolling_windows

DTYPES = ("auto", "float16", "bfloat16", "float32")


def _positive(value, name: str, kind=int):
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")
    return number


class VLLMBackend(Backend):
    """A local safetensors checkpoint run by vLLM's offline engine on GPU.

    Parameters
    ----------
    path : str or Path
        Folder with ``config.json``, ``*.safetensors`` and tokenizer files (no hub downloads).
    dtype : {"auto", "float16", "bfloat16", "float32"}
        vLLM's ``dtype``.
    tensor_parallel_size : int
        GPUs to shard the model over.
    gpu_memory_utilization : float
        Fraction of GPU memory vLLM may take, in (0, 1].
    max_length : int, optional
        Context window (vLLM's ``max_model_len``); default the model's.
    seed : int
        Engine seed (per-request seeds come from the requests).
    """

    name = "vllm"

    def __init__(
        self,
        *,
        path: str | os.PathLike,
        dtype: str = "auto",
        tensor_parallel_size: int | str = 1,
        gpu_memory_utilization: float | str = 0.9,
        max_length: int | str | None = None,
        seed: int | str = 0,
        trust_remote_code: bool | str = False,
    ) -> None:
        self.path, self.weight_files = local_checkpoint(
            path, dtype=dtype, dtypes=DTYPES, trust_remote_code=trust_remote_code
        )
        self.dtype_name = dtype
        self.tensor_parallel_size = _positive(tensor_parallel_size, "tensor_parallel_size")
        utilization = _positive(gpu_memory_utilization, "gpu_memory_utilization", float)
        if utilization > 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {utilization}")
        window = _positive(max_length, "max_length") if max_length is not None else None
        self.seed = int(seed)
        try:
            from vllm import LLM
        except ModuleNotFoundError as exc:
            raise ValueError(
                "the vllm backend needs the package 'vllm' (installed on GPU workers only); "
                "use the hf backend here, or the openai backend against a vLLM server"
            ) from exc
        self.llm = LLM(
            model=str(self.path),
            tokenizer=str(self.path),
            dtype=dtype,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=utilization,
            max_model_len=window,
            seed=self.seed,
            trust_remote_code=False,
            load_format="safetensors",
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.max_length = int(window or self._engine_window())
        self.eos_token_id = self.tokenizer.eos_token_id
        bos = self.tokenizer.bos_token_id
        self.prefix_token_id = bos if bos is not None else self.eos_token_id
        self._identity: ModelIdentity | None = None

    def _engine_window(self) -> int:
        try:
            return int(self.llm.llm_engine.model_config.max_model_len)
        except AttributeError:  # engine internals moved: fall back to the checkpoint's config
            config = json.loads((self.path / "config.json").read_text())
            return int(config.get("max_position_embeddings") or 2048)

    @property
    def identity(self) -> ModelIdentity:
        if self._identity is None:
            self._identity = ModelIdentity(
                backend=self.name,
                name=self.path.name,
                weights_sha256=hash_files(self.weight_files),
                dtype=self.dtype_name,
                batch_size="auto",
                extra={"max_length": self.max_length, "tensor_parallel_size": self.tensor_parallel_size},
            )
        return self._identity

    # ----------------------------------------------------------------------------------------------
    def tok_encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids of (context, continuation), split as the hf backend and the harness split them."""
        if not context:
            return [self.prefix_token_id], self.tok_encode(continuation)
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole = self.tok_encode(context + continuation)
        n_context = len(self.tok_encode(context))
        return whole[:n_context], whole[n_context:]

    def _generate(self, prompts: list[list[int]], params: list):
        from vllm.inputs import TokensPrompt

        return self.llm.generate(
            [TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False
        )

    def _score_pairs(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool, int]]:
        """(sum of continuation log-probabilities, all of rank 1, count) per (context, continuation)."""
        from vllm import SamplingParams

        prompts, n_scored = [], []
        for context, continuation in pairs:
            if not continuation:
                raise ValueError("the continuation is empty: there is nothing to score")
            # one token below the window: vLLM also needs room for the one token it generates
            ids = (context + continuation)[-(self.max_length - 1) :]
            prompts.append(ids)
            n_scored.append(min(len(continuation), len(ids) - 1))
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1, detokenize=False)
        outputs = self._generate(prompts, [params] * len(prompts))
        results = []
        for ids, count, output in zip(prompts, n_scored, outputs):
            total, greedy = 0.0, True
            for position in range(len(ids) - count, len(ids)):
                entry = output.prompt_logprobs[position][ids[position]]
                total += float(entry.logprob)
                rank = entry.rank
                if rank is None:
                    best = max(lp.logprob for lp in output.prompt_logprobs[position].values())
                    rank = 1 if entry.logprob >= best else 2
                greedy = greedy and rank == 1
            results.append((total, greedy, count))
        return results

    def next_token_logprobs(self, prompts, token_ids, *, progress=None) -> list[list[float] | Exception]:
        """Exact next-token log-probabilities: each wanted id is appended to the prompt and read from
        ``prompt_logprobs`` (vLLM always reports the prompt's own token, so no top-k cut can hide it;
        prefix caching runs the shared prompt once)."""
        out: list[list[float] | Exception | None] = [None] * len(prompts)
        pairs, owners = [], []
        for index, ids in enumerate(prompts):
            if len(ids) + 2 > self.max_length:  # the prompt, the wanted token, the generated one
                out[index] = ValueError(f"the prompt has {len(ids)} tokens, more than the window allows "
                                        f"({self.max_length - 2})")  # fmt: skip
                continue
            pairs += [(list(ids), [int(token)]) for token in token_ids]
            owners.append(index)
        try:
            scored = [logprob for logprob, _, _ in self._score_pairs(pairs)] if pairs else []
        except Exception as exc:  # noqa: BLE001 - the engine failed this batch: each item reports it
            scored, failure = [], exc
        else:
            failure = None
        width = len(token_ids)
        for k, index in enumerate(owners):
            out[index] = failure if failure is not None else scored[k * width : (k + 1) * width]
        if progress is not None:
            progress(len(prompts))
        return out  # type: ignore[return-value]

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], *, progress=None
    ) -> list[LoglikelihoodResult]:
        scored = self._score_pairs([self.encode_pair(r.context, r.continuation) for r in requests])
        if progress is not None:
            progress(len(requests))
        return [LoglikelihoodResult(lp, greedy, n) for lp, greedy, n in scored]

    def loglikelihood_rolling(
        self, requests: Sequence[RollingRequest], *, progress=None
    ) -> list[RollingResult]:
        pairs, owners = [], []
        for index, request in enumerate(requests):
            largest = self.max_length - 2  # window + 1 prompt tokens, + 1 generated, fit max_model_len
            window = request.max_length or largest
            stride = request.stride or window
            if not 0 < stride <= window or window > largest:
                raise ValueError(
                    f"rolling window {window} / stride {stride} must satisfy 0 < stride <= window <= {largest}"
                )
            tokens = [self.prefix_token_id, *self.tok_encode(request.text)]
            for context, targets in rolling_windows(tokens, window=window, stride=stride):
                pairs.append((context, targets))
                owners.append(index)
        totals, counts = [0.0] * len(requests), [0] * len(requests)
        for owner, (logprob, _, n) in zip(owners, self._score_pairs(pairs) if pairs else []):
            totals[owner] += logprob
            counts[owner] += n
        if progress is not None:
            progress(len(requests))
        return [RollingResult(t, c) for t, c in zip(totals, counts)]

    # ----------------------------------------------------------------------------------------------
    def generate_until(
        self, requests: Sequence[GenerationRequest], *, progress=None
    ) -> list[GenerationResult]:
        from vllm import SamplingParams

        prompts, params = [], []
        for request in requests:
            if request.max_gen_toks < 1:
                raise ValueError("max_gen_toks must be at least 1")
            budget = max(1, self.max_length - request.max_gen_toks)
            prompts.append(self.tok_encode(request.context)[-budget:] or [self.prefix_token_id])
            sampled = request.do_sample and request.temperature > 0
            params.append(
                SamplingParams(
                    max_tokens=request.max_gen_toks,
                    temperature=request.temperature if sampled else 0.0,
                    top_p=request.top_p if sampled else 1.0,
                    seed=int(request.seed),
                    stop=list(request.until) or None,
                )
            )
        results = []
        for request, output in zip(requests, self._generate(prompts, params)):
            completion = output.outputs[0]
            text, stopped = cut_at_stop(completion.text, request.until)
            reason = "stop" if stopped or completion.finish_reason == "stop" else "length"
            results.append(GenerationResult(text, len(completion.token_ids), reason))
        if progress is not None:
            progress(len(requests))
        return results

    def stream_chat(self, messages: Sequence[dict], params: ChatParams | dict | None = None) -> Iterator[str]:
        from vllm import SamplingParams

        params = ChatParams.from_mapping(params)
        messages = validate_messages(messages)
        if params.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if params.system_prompt and messages[0]["role"] != "system":
            messages = [{"role": "system", "content": params.system_prompt}, *messages]
        rendered = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tok_encode(rendered)
        if len(ids) + params.max_new_tokens > self.max_length:
            raise ValueError(
                f"the conversation is {len(ids)} tokens; with max_new_tokens={params.max_new_tokens} it exceeds "
                f"the model's {self.max_length}-token window: shorten it or lower max_new_tokens"
            )
        sampling = SamplingParams(
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=list(params.stop) or None,
        )
        (output,) = self._generate([ids], [sampling])
        text, _ = cut_at_stop(output.outputs[0].text, params.stop)
        if text:
            yield text

    def close(self) -> None:
        self.llm = None
