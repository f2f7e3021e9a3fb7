"""Hypothesis settings for the fuzz tests: repeatable (derandomized), bounded, never timed.

``PODIUM_FUZZ_EXAMPLES`` raises the number of examples per test for a longer local run
(tests/README.md, "Fuzzing").
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.arena import vote_data
from tests.leaderboard import board_data

EXAMPLES = int(os.environ.get("PODIUM_FUZZ_EXAMPLES", "40"))

settings.register_profile(
    "podium-fuzz",
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)
settings.load_profile("podium-fuzz")


@pytest.fixture
def seeded(db):
    """A little of everything the API shows: models, voted battles with turns, a snapshot, a run."""
    owner = board_data.user("owner@example.com")
    staff = board_data.user("staff@example.com", staff=True)
    entry = board_data.entry(owner, "acme/small", gsm8k=board_data.pattern(6, 3), mmlu={"anatomy": [True, False]})
    board_data.entry(owner, "acme/private", gsm8k=[True, False], private=True, model_type="fine-tuned")
    votes = vote_data.votes_create({"alpha": 0.5, "beta": 0.0, "gamma": -0.5}, 12, with_turns=True, turn_count=[1, 2])
    snapshot = board_data.arena_snapshot({"alpha": (1050.0, 1020.0, 1080.0), "beta": (1000.0, 970.0, 1030.0)})
    return {
        "owner": owner, "staff": staff, "battle": votes[0].battle.public_id, "snapshot": snapshot.pk,
        "run": entry.runs.order_by("pk").first().pk,
    }  # fmt: skip
