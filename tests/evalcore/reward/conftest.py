"""A small reward model on the real SmolLM2 (its score head random, seeded: accuracy near chance), a copy
of SmolLM2 with perturbed weights (a DPO policy), and a dozen short preference pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.evalcore.reward.heads import build_reward_head, copy_tokenizer

PERTURB_SEED = 99
TEXT_CHARS = 160


@pytest.fixture(scope="session")
def reward_dir(smollm2_dir, tmp_path_factory) -> Path:
    """LlamaForSequenceClassification (num_labels=1): SmolLM2's weights, a score head drawn with HEAD_SEED."""
    return build_reward_head(smollm2_dir, tmp_path_factory.mktemp("reward-model"))


@pytest.fixture(scope="session")
def perturbed_dir(smollm2_dir, tmp_path_factory) -> Path:
    """SmolLM2 with N(0, 0.02) noise (PERTURB_SEED) added to every attention and MLP weight."""
    import torch
    from transformers import AutoModelForCausalLM

    dst = tmp_path_factory.mktemp("perturbed")
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32, local_files_only=True)
    generator = torch.Generator().manual_seed(PERTURB_SEED)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "layers." in name and weight.ndim == 2:
                weight.add_(torch.randn(weight.shape, generator=generator) * 0.02)
    model.save_pretrained(dst)
    copy_tokenizer(smollm2_dir, dst)
    return dst


@pytest.fixture(scope="session")
def pairs_files(shared_data, tmp_path_factory) -> dict[str, Path]:
    """``llmbar``: LLMBar's first 8 pairs, texts cut to TEXT_CHARS; ``mtbench``: MT-Bench's first 2 pairs
    cut the same way plus 2 pairs whose answers are identical (their rewards must tie)."""
    folder = tmp_path_factory.mktemp("pairs")

    def cut(rows):
        return [{k: (v[:TEXT_CHARS] if isinstance(v, str) else v) for k, v in row.items()} for row in rows]

    llmbar = cut(json.loads((shared_data / "judges" / "llmbar_natural.json").read_text())[:8])
    mtbench = cut(json.loads((shared_data / "judges" / "mtbench_human_majority.json").read_text())[:2])
    mtbench += [{"input": "Name a colour.", "output_1": "Blue.", "output_2": "Blue.", "label": 1},
                {"input": "What is 2 + 2?", "output_1": "4", "output_2": "4", "label": 2}]  # fmt: skip
    paths = {"llmbar": folder / "llmbar.json", "mtbench": folder / "mtbench.jsonl"}
    paths["llmbar"].write_text(json.dumps(llmbar))
    paths["mtbench"].write_text("".join(json.dumps(row) + "\n" for row in mtbench))
    return paths
