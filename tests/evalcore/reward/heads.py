"""A small reward model for tests: SmolLM2's weights under a score head drawn with a fixed seed."""

from __future__ import annotations

import shutil
from pathlib import Path

HEAD_SEED = 1234


def copy_tokenizer(src: Path, dst: Path) -> None:
    for file in src.iterdir():
        if file.name.startswith(("tokenizer", "chat_template", "special_tokens")):
            shutil.copy(file, dst / file.name)


def build_reward_head(smollm2_dir: Path, dst: Path, *, seed: int = HEAD_SEED) -> Path:
    """LlamaForSequenceClassification (num_labels=1) in ``dst``: SmolLM2's weights, a score head drawn with ``seed``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaForSequenceClassification

    dst.mkdir(parents=True, exist_ok=True)
    config = AutoConfig.from_pretrained(smollm2_dir, local_files_only=True)
    config.num_labels, config.architectures = 1, ["LlamaForSequenceClassification"]
    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(config)
    causal = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32, local_files_only=True)
    model.model.load_state_dict(causal.model.state_dict())
    model.save_pretrained(dst)
    copy_tokenizer(smollm2_dir, dst)
    return dst
