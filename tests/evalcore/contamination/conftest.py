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
