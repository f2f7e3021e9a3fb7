"""Real tiny checkpoints for the submission tests: a random 1-layer Llama saved as safetensors
with SmolLM2's real tokenizer files beside it."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


@functools.cache
def tiny_checkpoint(root: str, tokenizer_from: str, *, seed: int = 0, max_shard_size: str | None = None) -> Path:
    """A folder with config.json, generation_config.json, *.safetensors and the tokenizer files."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    target = Path(root) / f"tiny-llama-{seed}-{max_shard_size or 'single'}"
    if target.exists():
        return target
    torch.manual_seed(seed)
    source = Path(tokenizer_from)
    config = LlamaConfig(
        vocab_size=49152, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        intermediate_size=32, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(target, safe_serialization=True, **kwargs)
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, target / name)
    return target


def parameter_count(folder: Path) -> int:
    from safetensors import safe_open

    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="numpy") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                shape = handle.get_slice(key).get_shape()
                n = 1
                for d in shape:
                    n *= d
                total += n
    return total
