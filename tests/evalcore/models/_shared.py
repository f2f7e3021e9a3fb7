"""One SmolLM2 backend per test session, shared by the engine and model tests."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def smollm2_backend(path: str, batch_size: str = "auto"):
    import torch

    from evalcore.models import load_backend

    torch.set_num_threads(1)
    return load_backend("hf", path=str(Path(path)), dtype="float32", device="cpu", batch_size=batch_size)


@functools.cache
def tiny_model_dir(root: str, tokenizer_from: str) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer, saved as safetensors (plumbing tests)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    target = Path(root) / "tiny-llama"
    if (target / "model.safetensors").exists():
        return target
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    return target
