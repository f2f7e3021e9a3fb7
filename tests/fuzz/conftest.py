"""Hypothesis settings for the fuzz tests: repeatable (derandomized), bounded, never timed.

``PODIUM_FUZZ_EXAMPLES`` raises the number of examples per test for a longer local run
(tests/README.md, "Fuzzing").
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.internal.conjecture import providers as hypothesis_providers

try:  # pytest 9 builds node ids from NodeId objects
    from _pytest.nodeid import coerce_node_id
except ImportError:  # pytest 8: an item's node id is its name, nothing to mend
    coerce_node_id = None

from arena.publication.holds import battles_moderate
from tests.arena import vote_data
from tests.leaderboard import board_data

# Hypothesis also draws constants from the project's modules that are imported when a test runs. Which
# ones a function imports lazily depends on the tests that ran before in the same process: with pytest-xdist
# that changes from run to run. Importing every module of the project here makes the set the same for
# every run, whichever worker a fuzz file lands on and whatever ran before it.
PACKAGES = ("arena", "common", "config", "evalcore", "leaderboard", "podium_client", "workers")
SKIPPED = ("__main__", "config.settings.")  # a CLI entry point; other settings modules read the environment


def import_project_modules() -> list[str]:
    root, failed = Path(__file__).resolve().parents[2], []
    for package in PACKAGES:
        for info in pkgutil.walk_packages([str(root / package)], prefix=f"{package}."):
            if info.name.endswith(SKIPPED[0]) or (info.name.startswith(SKIPPED[1]) and info.name != "config.settings.test"):
                continue
            try:
                importlib.import_module(info.name)
            except Exception as error:  # an optional extra (vllm) not installed: the same on every run
                failed.append(f"{info.name}: {error}")
    return failed


IMPORT_FAILURES = import_project_modules()


FROZEN: dict[str, object] = {}


def pytest_collection_finish(session):
    """Hypothesis reads the constants again whenever ``sys.modules`` grows: task code a test imports from
    its own temporary folder would still add some, depending on what ran before. Read them once, when
    collection is done and no test has run (hypothesis warns against reading them while conftest files
    load), and keep them. Where this hypothesis keeps them elsewhere, nothing changes and
    tests/fuzz/test_repeatable.py says so."""
    if FROZEN or not callable(getattr(hypothesis_providers, "_get_local_constants", None)):
        return
    constants = hypothesis_providers._get_local_constants()
    hypothesis_providers._get_local_constants = lambda: constants
    FROZEN["constants"] = constants

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
    battles_moderate()  # as the refit does before a snapshot: only moderated battles are published
    snapshot = board_data.arena_snapshot({"alpha": (1050.0, 1020.0, 1080.0), "beta": (1000.0, 970.0, 1030.0)})
    return {
        "owner": owner, "staff": staff, "battle": votes[0].battle.public_id, "snapshot": snapshot.pk,
        "run": entry.runs.order_by("pk").first().pk,
    }  # fmt: skip


def pytest_collection_modifyitems(items):
    """schemathesis names each operation's item ``test[GET /api/...]`` but gives all of them the test
    function's node id (pytest 9); pytest-xdist schedules and reports by node id, so it ran only one operation.
    Each item gets the node id its name says (as schemathesis itself does for lazily loaded schemas)."""
    for item in items if coerce_node_id is not None else ():
        if type(item).__name__ == "SchemathesisFunction" and not item.nodeid.endswith(f"::{item.name}"):
            item._id = coerce_node_id(f"{item.parent.nodeid}::{item.name}")
