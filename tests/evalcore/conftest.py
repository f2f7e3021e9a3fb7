"""Fixtures shared by the evalcore tests: the real SmolLM2 behind the hf backend, and a tiny random
Llama with its tokenizer for plumbing runs."""

from __future__ import annotations

import pytest

from tests.evalcore.models._shared import smollm2_backend, tiny_model_dir


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    """The real SmolLM2-135M-Instruct behind the hf backend (loaded once per session)."""
    return smollm2_backend(str(smollm2_dir))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, smollm2_dir):
    """A 2-layer random Llama with SmolLM2's tokenizer (cheap plumbing runs)."""
    return tiny_model_dir(str(tmp_path_factory.getbasetemp()), str(smollm2_dir))
