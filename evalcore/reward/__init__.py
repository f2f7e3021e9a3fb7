"""Reward models on preference pairs: sequence-classification reward models and DPO implicit rewards.

See ``docs/reward-models.md``. The public API::

    read_reward_pairs(["NAME=PATH", ...]) -> (list[RewardPair], list[PairsFile])   # pairs.py
    SequenceClassifierReward(path=..., dtype=...)                                  # classifier.py
    classifier_rewards(model, pairs) -> list[PairReward]                           # scoring.py
    dpo_rewards(policy, reference, pairs, beta=) -> list[PairReward]
    reward_report(records, files) -> dict   # accuracy overall, per category and per subset, mid-p 95% intervals
    reward_run(specs, model=, model_args=, ...) -> (report, records)               # run.py: the CLI's and the worker's run

``SequenceClassifierReward`` imports torch and transformers when constructed, not here.
"""

from evalcore.reward.pairs import PairsFile, RewardPair, parse_pairs_spec, read_reward_pairs
from evalcore.reward.scoring import (
    PairReward,
    classifier_rewards,
    dpo_context,
    dpo_rewards,
    dpo_tokens,
    reward_report,
)

__all__ = [
    "PairReward",
    "PairsFile",
    "RewardPair",
    "classifier_rewards",
    "dpo_context",
    "dpo_rewards",
    "dpo_tokens",
    "parse_pairs_spec",
    "read_reward_pairs",
    "reward_report",
]
