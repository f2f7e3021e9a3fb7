"""Tagging with the real SmolLM2 (hf backend): log-prob criteria, batching, the cache (a re-run makes no
model call), generated verdicts (SmolLM2 rarely writes the format: those tags fail, are recorded with the
answer and are not cached), the openai backend against ``python -m evalcore serve`` (same tags as hf),
and the agreement figure with its mid-p interval."""

from __future__ import annotations

import copy

import pytest

from evalcore.categories import (
    TagCache,
    agreement,
    category_protocol_from_dict,
    load_category_protocol,
    parse_criteria,
    prompt_sha256,
    tag_prompts,
    tagger_key,
)
from evalcore.judging import MemoryStore
from evalcore.models import load_backend
from tests.conftest import FLOAT32_ATOL
from tests.evalcore.categories.conftest import MIXED, PROMPTS
from tests.evalcore.models.test_serve import launch_serve, serve_process
from tests.midp_reference import midp


def test_log_prob_tags_record_the_tagger_protocol_and_each_criterion(tagger):
    protocol = category_protocol_from_dict(MIXED)
    tags = tag_prompts(tagger, protocol, PROMPTS)
    assert [t.prompt_sha256 for t in tags] == [prompt_sha256(p) for p in PROMPTS]
    for tag in tags:
        assert tag.ok and not tag.cached and tag.category == "mentions_code"
        assert (tag.tagger, tag.protocol, tag.protocol_version) == (
            tagger_key(tagger),
            "mentions-code",
            "test-1",
        )
        assert tag.protocol_sha256 == protocol.sha256 and tagger_key(tagger).startswith("hf:")
        assert 0.0 < tag.p_yes["code"] < 1.0
        assert tag.criteria == {"code": tag.p_yes["code"] > 0.5}
        assert tag.value is (tag.score >= 1)
    values = [t.value for t in tags]
    assert True in values and False in values  # this wording splits these prompts (poorly, but it does)


def test_a_batch_gives_each_prompt_the_tag_it_gets_alone(tagger):
    protocol = load_category_protocol("hard-prompt")
    together = tag_prompts(tagger, protocol, PROMPTS[:4])
    for prompt, tag in zip(PROMPTS[:4], together):
        alone = tag_prompts(tagger, protocol, [prompt])[0]
        assert alone.score == tag.score and alone.value == tag.value
        for name, p in tag.p_yes.items():
            assert alone.p_yes[name] == pytest.approx(p, abs=FLOAT32_ATOL)
        assert len(tag.p_yes) == 7 and tag.value is (tag.score >= 6)


def test_the_cache_answers_a_rerun_without_a_model_call(tagger):
    protocol = category_protocol_from_dict(MIXED)
    store = MemoryStore()
    cache = TagCache(store, tagger=tagger_key(tagger), protocol_sha256=protocol.sha256)
    first = tag_prompts(tagger, protocol, PROMPTS[:3], cache=cache)
    assert len(store.data) == 3
    saved = copy.deepcopy(store.data)

    class Unreachable:  # the same identity, but no model behind it: any model call fails the test
        identity = tagger.identity
        name = "hf"

    again = tag_prompts(Unreachable(), protocol, [PROMPTS[2], PROMPTS[0], PROMPTS[0]], cache=cache)
    assert [t.cached for t in again] == [True, True, True]
    assert [(t.value, t.p_yes) for t in again] == [(first[2].value, first[2].p_yes)] + [
        (first[0].value, first[0].p_yes)
    ] * 2
    assert store.data == saved
    other = category_protocol_from_dict({**MIXED, "user": "Prompt: {prompt}"})
    with pytest.raises(ValueError, match="another protocol"):
        tag_prompts(tagger, other, PROMPTS[:1], cache=cache)


def test_generated_verdicts_that_miss_the_format_fail_and_are_not_cached(tagger):
    protocol = category_protocol_from_dict({**MIXED, "verdict": {"method": "generate", "max_new_tokens": 12,
                                                                  "criteria": [{"name": "code", "prefix": "about code?"}]}})  # fmt: skip
    store = MemoryStore()
    tags = tag_prompts(tagger, protocol, PROMPTS[:2],
                       cache=TagCache(store, tagger=tagger_key(tagger), protocol_sha256=protocol.sha256))  # fmt: skip
    for tag in tags:
        if tag.ok:  # SmolLM2 wrote the line after all: then it is read as written
            assert tag.criteria == parse_criteria(protocol, tag.raw)
        else:
            assert "no line 'code: yes' or 'code: no'" in tag.error and tag.raw and tag.value is None
    assert len(store.data) == sum(t.ok for t in tags)


def test_parse_criteria_reads_lines_and_refuses_missing_or_contradictory_ones():
    protocol = category_protocol_from_dict({**MIXED, "verdict": {"method": "generate", "max_new_tokens": 9,
                                                                  "criteria": [{"name": "a"}, {"name": "b_c"}], "threshold": 2}})  # fmt: skip
    assert parse_criteria(protocol, "**a**: Yes\n2. b_c = no") == {"a": True, "b_c": False}
    with pytest.raises(ValueError, match="no line 'b_c: yes'"):
        parse_criteria(protocol, "a: yes\nb c: no")
    with pytest.raises(ValueError, match="both yes and no for a"):
        parse_criteria(protocol, "a: yes\na: no\nb_c: yes")


def test_prompts_longer_than_the_window_or_not_text_fail_clearly(tagger):
    protocol = category_protocol_from_dict(MIXED)
    tags = tag_prompts(tagger, protocol, ["word " * 9000, PROMPTS[0]])
    assert not tags[0].ok and "more than the tagger's window" in tags[0].error
    assert tags[1].ok
    with pytest.raises(ValueError, match="prompt 2 is a int"):
        tag_prompts(tagger, protocol, ["fine", 5])


def test_the_openai_backend_gives_the_hf_tags(tagger, smollm2_dir):
    launch_serve(str(smollm2_dir))
    host, port = serve_process(str(smollm2_dir))
    remote = load_backend("openai", base_url=f"http://{host}:{port}/v1", tokenizer=str(smollm2_dir),
                          top_logprobs="20", concurrency=2)  # fmt: skip
    protocol = category_protocol_from_dict(MIXED)
    got, want = tag_prompts(remote, protocol, PROMPTS[:3]), tag_prompts(tagger, protocol, PROMPTS[:3])
    assert [t.status for t in got] == ["ok"] * 3, [t.error for t in got]
    assert got[0].tagger != want[0].tagger  # another tagger key: the cache never mixes them
    for a, b in zip(got, want):
        assert a.value == b.value
        assert a.p_yes["code"] == pytest.approx(b.p_yes["code"], abs=FLOAT32_ATOL)


def test_agreement_is_the_share_agreeing_with_a_midp_interval():
    # 8 of 10 agree: Lancaster's mid-p 95% interval [0.4805, 0.9650], the p where P(X > 8) + P(X = 8) / 2 and
    # P(X < 8) + P(X = 8) / 2 are 0.025 (solved on scipy's binomial in tests/midp_reference.py).
    pairs = [(True, True)] * 5 + [(False, False)] * 3 + [(True, False), (False, True)]
    found = agreement(pairs)
    assert (found["n"], found["agree"], found["both_yes"], found["both_no"]) == (10, 8, 5, 3)
    assert (found["tagger_only"], found["staff_only"]) == (1, 1)
    assert found["value"] == pytest.approx(0.8, abs=1e-4) and found["interval"] == "mid-p"
    assert (found["ci_low"], found["ci_high"]) == pytest.approx(midp(8, 10), abs=1e-4)
    assert found["ci_low"] == pytest.approx(0.4805, abs=1e-4) and found["ci_high"] == pytest.approx(0.9650, abs=1e-4)
    assert found["stderr"] is None  # [0.48, 0.97] about 0.8 is lopsided
    # 4 of 4: the lower bound solves p^4 / 2 = 0.025.
    everything = agreement([(True, True)] * 4)
    assert everything["value"] == 1.0 and everything["ci_high"] == 1.0
    assert everything["ci_low"] == pytest.approx(0.05**0.25, abs=1e-4)
    empty = agreement([])
    assert empty["value"] is None and empty["n"] == 0 and empty["ci_low"] is None
    with pytest.raises(ValueError, match="level"):
        agreement(pairs, level=95)


def test_agreement_of_none_of_n_has_an_interval_above_zero():
    """A tagger that disagrees with all 5 checks: 0 of 5, upper bound 1 - 0.05^(1/5) = 0.4507, n recorded."""
    found = agreement([(True, False)] * 3 + [(False, True)] * 2)
    assert found["value"] == 0.0 and found["n"] == 5 and found["ci_low"] == 0.0
    assert found["ci_high"] == pytest.approx(1 - 0.05**0.2, abs=1e-4) and found["ci_high"] > 0
