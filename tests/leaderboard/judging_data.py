"""Judge configs and catalogue models for the judge tests: the real SmolLM2-135M-Instruct throughout."""

from __future__ import annotations

from arena.models import LanguageModel
from leaderboard.judging.services import judge_config_save
from leaderboard.models import JudgeConfig

INSTRUCTIONS = [
    "Name the capital of France.",
    "Generate two rhymes for the following word. Moon",
    "Explain: Pathos, Ethos, Logos",
]
TERSE = "Answer in at most five words."
WORDY = "Always answer with a long, thorough, formatted Markdown answer with headers and bullet lists."


def catalogue_model(name: str, smollm2_dir, *, system_prompt: str = "", in_arena: bool = True) -> LanguageModel:
    return LanguageModel.objects.create(
        name=name, backend="hf", model_args={"path": str(smollm2_dir), "dtype": "float32"},
        generation={"max_new_tokens": 24, "temperature": 0.0}, system_prompt=system_prompt, in_arena=in_arena,
    )  # fmt: skip


def judge_setup(smollm2_dir, *, instructions=INSTRUCTIONS, max_new_tokens: int = 16) -> dict:
    """A baseline and two judged models (same weights, different system prompts) and an active config."""
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    terse = catalogue_model("smol-terse", smollm2_dir, system_prompt=TERSE)
    wordy = catalogue_model("smol-wordy", smollm2_dir, system_prompt=WORDY)
    config = judge_config_save(JudgeConfig(
        name="smol-judge", judge_backend="hf", judge_model_args={"path": str(smollm2_dir), "dtype": "float32"},
        protocol_name="alpacaeval-logprob", baseline=baseline, instructions=list(instructions),
        max_new_tokens=max_new_tokens,
    ))  # fmt: skip
    return {"config": config, "baseline": baseline, "terse": terse, "wordy": wordy}
