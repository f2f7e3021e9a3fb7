from __future__ import annotations

import pytest

from tests.evalcore.models._shared import smollm2_backend


@pytest.fixture(scope="session")
def judge(smollm2_dir):
    """The real SmolLM2-135M-Instruct as the judge (hf backend, float32, CPU; loaded once)."""
    return smollm2_backend(str(smollm2_dir))


@pytest.fixture(scope="session")
def llmbar(shared_data):
    return shared_data / "judges" / "llmbar_natural.json"
