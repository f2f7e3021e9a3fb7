from __future__ import annotations

import pytest

from evalcore.contamination import benchmark_items


@pytest.fixture
def data_env(shared_data, monkeypatch):
    monkeypatch.setenv("PODIUM_DATA_DIR", str(shared_data))
    return shared_data


@pytest.fixture
def gsm8k_items(data_env):
    """The 1,319 GSM8K test items as the gsm8k task renders them."""
    return benchmark_items(["gsm8k"])


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    """The real SmolLM2-135M-Instruct behind the hf backend (loaded once per session)."""
    from tests.evalcore.models._shared import smollm2_backend

    return smollm2_backend(str(smollm2_dir))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, smollm2_dir):
    """A 2-layer random Llama with SmolLM2's tokenizer (cheap plumbing runs of the commands)."""
    from tests.evalcore.models._shared import tiny_model_dir

    return tiny_model_dir(str(tmp_path_factory.getbasetemp()), str(smollm2_dir))
