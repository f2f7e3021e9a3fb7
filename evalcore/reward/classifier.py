"""A sequence-classification reward model (``*ForSequenceClassification`` with one label) on CPU or GPU.

The reward of an answer is the score head's output at the conversation's last token, the conversation
being the prompt as a user turn and the answer as the assistant's, rendered with the model's chat
template (``prompt + "\\n\\n" + answer`` when it has none), as RewardBench scores classifiers. Rows of a
batch are padded on the right and the last real token of each is read from the attention mask (never
from a pad-token id, which a chat template may itself end with), so batched and one-by-one rewards agree.
Checkpoints load as the ``hf`` backend's do: safetensors only, no remote code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from evalcore.models.base import ModelIdentity
from evalcore.models.hf import DTYPES, hash_files, local_checkpoint


def conversation_text(tokenizer, prompt: str, answer: str) -> str:
    """The text a reward model reads for (prompt, answer): the chat template's rendering, else plain."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        return tokenizer.apply_chat_template(messages, tokenize=False)
    return f"{prompt}\n\n{answer}"


class SequenceClassifierReward:
    """A reward model loaded from a local folder of safetensors weights.

    Parameters
    ----------
    path : str or Path
        Folder with ``config.json`` (architecture ``*ForSequenceClassification``, ``num_labels`` 1),
        ``*.safetensors`` and tokenizer files.
    dtype, device, threads : as the ``hf`` backend's.
    batch_size : "auto" or int
        Rows per forward pass; ``"auto"`` fills ``token_budget`` padded tokens per pass.
    max_length : int, optional
        Longest conversation in tokens; default the model's ``max_position_embeddings`` (at most 8192).
        A longer one is not scored (its pair is reported as skipped, never truncated).
    """

    name = "hf"

    def __init__(self, *, path: str | os.PathLike, dtype: str = "float32", device: str = "auto",
                 batch_size: str | int = "auto", max_length: int | None = None, threads: int | None = None,
                 trust_remote_code: bool | str = False, token_budget: int | None = None) -> None:  # fmt: skip
        self.path, self.weight_files = local_checkpoint(path, dtype=dtype, dtypes=DTYPES,
                                                        trust_remote_code=trust_remote_code)  # fmt: skip
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(int(threads))
        config = AutoConfig.from_pretrained(str(self.path), local_files_only=True, trust_remote_code=False)
        architectures = list(getattr(config, "architectures", None) or [])
        if not any(a.endswith("ForSequenceClassification") for a in architectures):
            raise ValueError(f"model at {str(self.path)!r} is {', '.join(architectures) or 'of no architecture'}, not a "
                             "sequence-classification reward model; for a DPO policy give --ref-model-args")  # fmt: skip
        if config.num_labels != 1:
            raise ValueError(
                f"a reward model has one output (num_labels 1); the model at {str(self.path)!r} has {config.num_labels}"
            )
        self.batch_size = batch_size if batch_size == "auto" else int(batch_size)
        if self.batch_size != "auto" and self.batch_size < 1:
            raise ValueError("batch_size must be 'auto' or a positive integer")
        self.device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        )
        self.dtype_name = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(
            str(self.path), local_files_only=True, trust_remote_code=False
        )
        self.model = AutoModelForSequenceClassification.from_pretrained(
            str(self.path), dtype=getattr(torch, dtype), use_safetensors=True, local_files_only=True,
            trust_remote_code=False,
        ).to(self.device)  # fmt: skip
        self.model.eval()
        self.head = getattr(self.model, "score", None)
        if not isinstance(self.head, torch.nn.Linear):
            raise ValueError(f"{architectures[0]} is not supported: the reward is read from a linear 'score' head "
                             "(Llama, Mistral, Qwen2, Gemma, GPT-2 and other decoder models)")  # fmt: skip
        window = getattr(config, "max_position_embeddings", None) or 2048
        self.max_length = int(max_length) if max_length else min(int(window), 8192)
        self.token_budget = (
            int(token_budget) if token_budget else (8192 if self.device.type == "cpu" else 65536)
        )
        self.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._identity: ModelIdentity | None = None

    @property
    def identity(self) -> ModelIdentity:
        if self._identity is None:
            self._identity = ModelIdentity(backend="hf", name=self.path.name, weights_sha256=hash_files(self.weight_files),
                                           dtype=self.dtype_name, batch_size=str(self.batch_size),
                                           extra={"max_length": self.max_length, "head": "sequence-classification"})  # fmt: skip
        return self._identity

    def text(self, prompt: str, answer: str) -> str:
        return conversation_text(self.tokenizer, prompt, answer)

    def encode(self, prompt: str, answer: str) -> list[int]:
        return self.tokenizer(self.text(prompt, answer), add_special_tokens=False)["input_ids"]

    def rewards(self, conversations: Sequence[tuple[str, str]], *, progress=None) -> list[float | None]:
        """The reward of each (prompt, answer), in order; None where it is longer than ``max_length``.
        ``progress(n)`` is called after each forward pass with the number of distinct conversations it scored."""
        # Identical conversations (two identical answers) are computed once: their rewards tie exactly.
        encoded = [tuple(self.encode(p, a)) for p, a in conversations]
        unique = sorted(
            {ids for ids in encoded if 0 < len(ids) <= self.max_length}, key=lambda ids: (-len(ids), ids)
        )
        values: dict[tuple, float] = {}
        start = 0
        while start < len(unique):
            rows = (
                self.batch_size
                if self.batch_size != "auto"
                else max(1, self.token_budget // len(unique[start]))
            )
            batch = unique[start : start + rows]
            values.update(zip(batch, self._forward([list(ids) for ids in batch])))
            start += len(batch)
            if progress is not None:
                progress(len(batch))
        return [values.get(ids) for ids in encoded]

    def _forward(self, rows: list[list[int]]) -> list[float]:
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            hidden = self.model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
            last = hidden[torch.arange(len(rows), device=self.device), mask.sum(dim=1) - 1]
            scores = self.head(last)[:, 0].float().cpu()
        return [float(s) for s in scores]

    def close(self) -> None:
        self.model = None
