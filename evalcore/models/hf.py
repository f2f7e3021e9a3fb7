"""``hf``: a local transformers causal LM (safetensors only) on CPU or GPU.

Tokenisation follows EleutherAI's lm-evaluation-harness so scores agree with it:

- context and continuation: trailing whitespace of the context is moved to the start of the
  continuation; ``context + continuation`` is encoded as a whole and the continuation tokens are
  the ones after the first ``len(encode(context))`` tokens (so a merge across the boundary is
  attributed to the continuation, exactly as the harness does);
- no special tokens are added (the harness default for causal models) unless ``add_bos_token``;
  an empty context is replaced by the prefix token (BOS, else EOS);
- inputs longer than the model's window keep their last ``max_length`` tokens.

Speed: identical model inputs are computed once (a shared context with single-token choices is one
forward pass); requests are sorted so that shared prefixes (few-shot examples) sit together, and
a batch whose rows share a long prefix runs the prefix once and reuses its KV cache; batches run
longest first; only the positions that are scored go through the output layer.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

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
    validate_messages,
)
from evalcore.models.chat_templates import chat_template_choice as template_choice
from evalcore.models.chat_templates import render_chat
from evalcore.models.echo import prompt_token_logprobs
from evalcore.models.generation import generate_batch, stream_tokens
from evalcore.models.scoring import rolling_windows, score_pairs

DTYPES = ("float32", "float16", "bfloat16")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def find_weight_files(path: Path) -> list[Path]:
    """The safetensors files of a checkpoint folder; refuse folders holding only pickled weights."""
    if not path.is_dir():
        raise ValueError(f"model path {str(path)!r} is not a folder; pass the checkpoint folder")
    files = sorted(path.glob("*.safetensors"))
    if files:
        return files
    pickled = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickled:
        raise ValueError(
            f"model path {str(path)!r} holds only pickled weights ({', '.join(pickled)}); pickle files can "
            "run code when loaded, so Podium loads safetensors only: convert with save_pretrained(safe_serialization=True)"
        )
    raise ValueError(f"model path {str(path)!r} has no *.safetensors weight files")


def local_checkpoint(path, *, dtype: str, dtypes: Sequence[str], trust_remote_code) -> tuple[Path, list[Path]]:
    """Check a local checkpoint folder before loading it (hf and vllm backends share these rules).

    Returns the resolved folder and its safetensors files; refuses remote code, an unknown dtype, pickled
    weights and a folder without config.json, each with a ValueError the user can act on.
    """
    if str(trust_remote_code).lower() in ("1", "true", "yes"):
        raise ValueError("trust_remote_code is never enabled: Podium runs no code shipped with a checkpoint")
    if dtype not in dtypes:
        raise ValueError(f"dtype {dtype!r} is not supported; choose one of {tuple(dtypes)}")
    folder = Path(str(path)).expanduser().resolve()
    weight_files = find_weight_files(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"model path {str(folder)!r} has no config.json")
    return folder, weight_files


def hash_files(files: Sequence[Path], chunk: int = 1 << 22) -> str:
    """SHA-256 over the files' names and bytes, in sorted name order."""
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda p: p.name):
        digest.update(file.name.encode() + b"\0")
        with open(file, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    return digest.hexdigest()


class HFBackend(Backend):
    """A transformers causal LM loaded from a local folder of safetensors weights.

    Parameters
    ----------
    path : str or Path
        Folder with ``config.json``, ``*.safetensors`` and tokenizer files.
    dtype : {"float32", "float16", "bfloat16"}
        Weight and activation dtype (float32 is what the parity checks use).
    device : str
        ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or ``"auto"`` (CUDA when available).
    batch_size : "auto" or int
        Rows per forward pass; ``"auto"`` sizes batches by a token budget.
    max_length : int, optional
        Context window in tokens; default the model's ``max_position_embeddings`` (at most 8192).
    add_bos_token : bool
        Prepend BOS to every encoded context (the harness's ``add_bos_token``).
    threads : int, optional
        ``torch.set_num_threads`` for this process.
    """

    name = "hf"

    def __init__(
        self,
        *,
        path: str | os.PathLike,
        dtype: str = "float32",
        device: str = "auto",
        batch_size: str | int = "auto",
        max_length: int | str | None = None,
        add_bos_token: bool | str = False,
        threads: int | str | None = None,
        trust_remote_code: bool | str = False,
        token_budget: int | str | None = None,
    ) -> None:
        self.path, self.weight_files = local_checkpoint(
            path, dtype=dtype, dtypes=DTYPES, trust_remote_code=trust_remote_code
        )
        import torch

        if threads is not None:
            torch.set_num_threads(int(threads))
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.dtype_name = dtype
        self.batch_size = batch_size if batch_size == "auto" else int(batch_size)
        if self.batch_size != "auto" and self.batch_size < 1:
            raise ValueError("batch_size must be 'auto' or a positive integer")
        self.add_bos_token = str(add_bos_token).lower() in ("1", "true", "yes")

        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(
            str(self.path), local_files_only=True, trust_remote_code=False
        )
        self.model = AutoModelForCausalLM.from_pretrained(
            str(self.path),
            dtype=getattr(torch, dtype),
            use_safetensors=True,
            local_files_only=True,
            trust_remote_code=False,
        ).to(self.device)
        self.model.eval()
        config = self.model.config
        window = getattr(config, "max_position_embeddings", None) or 2048
        self.max_length = int(max_length) if max_length else min(int(window), 8192)
        default_budget = 8192 if self.device.type == "cpu" else 65536
        self.token_budget = int(token_budget) if token_budget else default_budget
        self.eos_token_id = self.tokenizer.eos_token_id
        bos = self.tokenizer.bos_token_id
        self.prefix_token_id = bos if bos is not None else self.eos_token_id
        self.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._identity: ModelIdentity | None = None

    # ----------------------------------------------------------------------------------------------
    @property
    def identity(self) -> ModelIdentity:
        if self._identity is None:
            self._identity = ModelIdentity(
                backend=self.name,
                name=self.path.name,
                weights_sha256=hash_files(self.weight_files),
                dtype=self.dtype_name,
                batch_size=str(self.batch_size),
                extra={"max_length": self.max_length, "add_bos_token": self.add_bos_token},
            )
        return self._identity

    def tok_encode(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.add_bos_token and self.tokenizer.bos_token_id is not None:
            ids = [self.tokenizer.bos_token_id, *ids]
        return ids

    def tok_decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    @property
    def vocab_size(self) -> int:
        """Token ids run from 0 to ``vocab_size - 1`` (added tokens included)."""
        return len(self.tokenizer)

    def prompt_token_logprobs(self, prompt: str | Sequence[int], *, top_n: int, continuation_ids=()) -> dict:
        """Per-token log-probabilities of a text or token-id prompt and the tokens generated after it
        (see :mod:`evalcore.models.echo`)."""
        return prompt_token_logprobs(self, prompt, top_n=top_n, continuation_ids=continuation_ids)

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids of (context, continuation), split the way the harness splits them."""
        if not context:
            return [self.prefix_token_id], self.tok_encode(continuation)
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole = self.tok_encode(context + continuation)
        context_ids = self.tok_encode(context)
        return whole[: len(context_ids)], whole[len(context_ids) :]

    # ----------------------------------------------------------------------------------------------
    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], *, progress=None
    ) -> list[LoglikelihoodResult]:
        pairs = [self.encode_pair(r.context, r.continuation) for r in requests]
        scored = self._score_pairs(pairs, progress=progress)
        return [LoglikelihoodResult(lp, greedy, n) for lp, greedy, n in scored]

    def loglikelihood_tokens(self, pairs, *, progress=None) -> list[LoglikelihoodResult]:
        """Score (context ids, continuation ids) as given (see :meth:`Backend.loglikelihood_tokens`)."""
        pairs = [(list(c), list(t)) for c, t in pairs]
        for context, continuation in pairs:
            if not context or not continuation:
                raise ValueError("loglikelihood_tokens needs a non-empty context and continuation")
        scored = self._score_pairs(pairs, progress=progress)
        return [LoglikelihoodResult(lp, greedy, n) for lp, greedy, n in scored]

    def loglikelihood_rolling(
        self, requests: Sequence[RollingRequest], *, progress=None
    ) -> list[RollingResult]:
        pairs, owners = [], []
        for index, request in enumerate(requests):
            window = request.max_length or self.max_length
            stride = request.stride or window
            if not 0 < stride <= window or window > self.max_length:
                raise ValueError(
                    f"rolling window {window} / stride {stride} must satisfy 0 < stride <= window <= {self.max_length}"
                )
            tokens = [self.prefix_token_id, *self.tok_encode(request.text)]
            for context, targets in rolling_windows(tokens, window=window, stride=stride):
                pairs.append((context, targets))
                owners.append(index)
        scored = self._score_pairs(pairs, progress=progress)
        totals = [0.0] * len(requests)
        counts = [0] * len(requests)
        for owner, (logprob, _, n) in zip(owners, scored):
            totals[owner] += logprob
            counts[owner] += n
        return [RollingResult(t, c) for t, c in zip(totals, counts)]

    def _score_pairs(self, pairs, *, progress=None) -> list[tuple[float, bool, int]]:
        return score_pairs(self, pairs, progress=progress)

    # ----------------------------------------------------------------------------------------------
    def generate_until(
        self, requests: Sequence[GenerationRequest], *, progress=None
    ) -> list[GenerationResult]:
        for request in requests:
            if request.max_gen_toks < 1:
                raise ValueError("max_gen_toks must be at least 1")
        eos_text = self.tokenizer.decode([self.eos_token_id]) if self.eos_token_id is not None else ""
        rows = []
        for request in requests:
            budget = max(1, self.max_length - request.max_gen_toks)
            ids = self.tok_encode(request.context)[-budget:] or [self.prefix_token_id]
            until = tuple(request.until) + ((eos_text,) if eos_text and eos_text not in request.until else ())
            rows.append((ids, until, request))
        return generate_batch(self, rows, progress=progress)

    def stream_chat(self, messages: Sequence[dict], params: ChatParams | dict | None = None) -> Iterator[str]:
        params = ChatParams.from_mapping(params)
        messages = validate_messages(messages)
        if params.system_prompt and messages[0]["role"] != "system":
            messages = [{"role": "system", "content": params.system_prompt}, *messages]
        ids = self.chat_prompt_ids(messages)
        return (yield from stream_tokens(self, ids, params))  # the finish reason (ChatStream)

    def chat_context(self, messages, *, chat_template: str | None = None) -> str:
        """The conversation rendered with the model's chat template, ending with the assistant's turn
        (a final assistant message, a task's ``gen_prefix``, is continued rather than closed).
        ``chat_template`` names one of the tokenizer's templates (:mod:`evalcore.models.chat_templates`)."""
        return render_chat(self.tokenizer, validate_messages(messages), chat_template)

    def chat_template_choice(self, name: str | None = None) -> dict:
        return template_choice(self.tokenizer, name)

    def chat_prompt_ids(self, messages: list[dict]) -> list[int]:
        """Token ids of the conversation rendered with the model's chat template."""
        if not getattr(self.tokenizer, "chat_template", None):
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
            return self.tok_encode(text)
        rendered = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(rendered, add_special_tokens=False)["input_ids"]

    def close(self) -> None:
        import torch

        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
