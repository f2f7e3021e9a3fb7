"""A tiny randomly initialised llama with a real model's tokenizer, for measuring an engine loop's own cost.

Its engine step on CPU is as short as a 135M model's on a GPU (a few milliseconds), so what a serving
loop spends outside the model shows as it would there (``bench/vllm_bench.py --workload intervals``).
Its texts mean nothing: use it for timings of the loop, never for a model's numbers.

Usage::

    python bench/tiny_llama.py var/models/SmolLM2-135M-Instruct var/models/tiny-llama
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizer_from", type=Path, help="a model folder whose tokenizer the tiny model takes")
    parser.add_argument("target", type=Path, help="the folder to write (safetensors, config, tokenizer)")
    args = parser.parse_args()
    if not (args.tokenizer_from / "tokenizer_config.json").is_file():
        parser.error(f"{args.tokenizer_from} has no tokenizer_config.json")

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_from, local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1,  # head_dim 64: vLLM's CPU attention refuses 16
        max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(args.target, safe_serialization=True)
    tokenizer.save_pretrained(args.target)
    print(args.target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
