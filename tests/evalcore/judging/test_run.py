"""Static scores from a judge: win rate, LC win rate, Bradley-Terry; a re-run is exact and makes no model call."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from evalcore.judging import (
    AnswerCache,
    GradeItem,
    JudgmentCache,
    SqliteStore,
    grade_answers,
    judge_key,
    load_protocol,
    pair_outcomes,
)
from evalcore.judging.records import Judgment
from evalcore.judging.run import (
    GenerationSettings,
    Instruction,
    _win_rates,
    generate_answers,
    judge_run,
    read_instructions,
)
from tests.midp_reference import midp, midp_effective, symmetric_se

MODELS = {"base": 12, "terse": 5, "wordy": 24}  # one checkpoint, three answer lengths


@pytest.fixture
def counted(judge, monkeypatch):
    """Count the judge's real generation calls and forward passes."""
    calls = {"generate": 0, "forward": 0}
    original = judge.generate_until

    def generate_until(requests, **kwargs):
        calls["generate"] += 1
        return original(requests, **kwargs)

    monkeypatch.setattr(judge, "generate_until", generate_until)
    handle = judge.model.base_model.register_forward_hook(lambda *a: calls.__setitem__("forward", calls["forward"] + 1))
    yield calls
    handle.remove()


def score(judge, protocol, instructions, path):
    store = SqliteStore(path)
    answers_cache = AnswerCache(store)
    answers = {
        name: [r["answer"] for r in generate_answers(judge, instructions, settings=GenerationSettings(max_new_tokens=n),
                                                     cache=answers_cache)]
        for name, n in MODELS.items()
    }
    cache = JudgmentCache(store, judge_key=judge_key(judge), protocol_sha256=protocol.sha256)
    results, judged = judge_run(judge, protocol, instructions, answers, baseline="base", cache=cache, rounds=200, seed=3)
    store.close()
    return answers, results, judged


def test_judge_run_scores_and_reruns_from_the_cache(judge, llmbar, tmp_path, counted):
    instructions = read_instructions(llmbar, limit=3)
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    answers, results, judged = score(judge, protocol, instructions, tmp_path / "cache.sqlite")
    assert counted["generate"] == 3 and counted["forward"] > 0
    assert [m for m, _ in judged] == ["terse"] * 6 + ["wordy"] * 6
    for model in ("terse", "wordy"):
        outcomes, failed = pair_outcomes([j for m, j in judged if m == model])
        entry = results["models"][model]
        assert not failed and entry["n"] == 3
        assert entry["win_rate"] == pytest.approx(100 * np.mean([1 - o.swap_average for o in outcomes]), abs=1e-9)
        assert 0 <= entry["lc_ci_low"] <= entry["lc_win_rate"] <= entry["lc_ci_high"] <= 100
        assert entry["lc_interval"] == "delta-mid-p" and entry["win_rate_interval"] in ("mid-p", "mid-p-effective")
        assert entry["win_rate_ci_low"] <= entry["win_rate"] <= entry["win_rate_ci_high"]
    bt = results["bradley_terry"]["ratings"]
    assert set(bt) == set(MODELS)
    assert all(v["ci_low"] <= v["rating"] <= v["ci_high"] for v in bt.values())
    assert results["bradley_terry_style"] is not None or any("style" in n for n in results["notes"])

    counted.update(generate=0, forward=0)
    again_answers, again, again_judged = score(judge, protocol, instructions, tmp_path / "cache.sqlite")
    assert counted == {"generate": 0, "forward": 0}
    assert again_answers == answers and again == results
    assert all(j.cached for _, j in again_judged)
    assert [j.p_first for _, j in again_judged] == [j.p_first for _, j in judged]


def _judged(model: str, p_firsts: list[tuple[float, float]]) -> list[Judgment]:
    """Both orders of ``model``'s pair on instructions 0, 1, ...: (p_first with the baseline shown first,
    p_first with the model shown first)."""
    return [j for k, (ab, ba) in enumerate(p_firsts)
            for j in (Judgment(f"{model}/{k}", "ab", "x", "ok", p_first=ab), Judgment(f"{model}/{k}", "ba", "x", "ok", p_first=ba))]  # fmt: skip


def test_win_rates_carry_intervals_and_n():
    """Win rates are means of preferences in [0, 1]: a mid-p interval at their effective size n / deff,
    deff = s^2 / (m (1 - m)) held in [0.5, 1] (exact mid-p when every preference is 0 or 1), with the
    interval's standard error or none; the LC win rate's is mid-p at the effective size of its delta-method error. A model
    that never wins gets 0% with an interval above 0."""
    n = 6
    instructions = [Instruction(str(k), f"q{k}") for k in range(n)]
    answers = {"base": ["a" * 10] * n, "never": ["b" * (5 + k) for k in range(n)], "mixed": ["c" * (8 + 5 * k) for k in range(n)]}
    prefs = [0.8, 0.3, 0.6, 0.9, 0.2, 0.7]  # the judge's preference for mixed's answer over the baseline's
    judgments = _judged("never", [(1.0, 0.0)] * n) + _judged("mixed", [(1 - p, p) for p in prefs])
    owner = {f"{m}/{k}": (m, k) for m in ("never", "mixed") for k in range(n)}
    notes: list[str] = []
    out = _win_rates(judgments, owner, ["never", "mixed"], instructions, answers, "base", notes)
    never = out["never"]
    assert (never["n"], never["win_rate"], never["win_rate_interval"]) == (n, 0.0, "mid-p")
    # 0 of 6: the mid-p upper bound solves (1 - p)^6 / 2 = 0.025: 100 (1 - 0.05^(1/6)) = 39.3%.
    assert never["win_rate_ci_low"] == 0.0 and never["win_rate_ci_high"] == pytest.approx(100 * (1 - 0.05 ** (1 / 6)), abs=1e-4)
    assert never["standard_error"] is None  # [0, 39.3] about 0 is lopsided
    assert never["discrete_win_rate"] == 0.0 and never["discrete_ci_high"] == never["win_rate_ci_high"]
    mixed = out["mixed"]
    m = np.mean(prefs)
    effective = n / min(1.0, max(0.75 if n < 10 else 0.5, np.var(prefs, ddof=1) / (m * (1 - m))))  # 0.75 under 10
    low, high = midp_effective(m * effective, effective)
    assert (mixed["n"], mixed["win_rate_interval"], mixed["level"]) == (n, "mid-p-effective", 0.95)
    assert mixed["win_rate"] == pytest.approx(100 * m, abs=1e-4)
    assert (mixed["win_rate_ci_low"], mixed["win_rate_ci_high"]) == pytest.approx((100 * low, 100 * high), abs=1e-4)
    assert mixed["standard_error"] == pytest.approx(100 * symmetric_se(m, low, high), abs=1e-4)
    # discrete: 4 wins of 6 (no preference is exactly 0.5): exact mid-p
    assert mixed["discrete_interval"] == "mid-p"
    assert (mixed["discrete_ci_low"], mixed["discrete_ci_high"]) == pytest.approx(tuple(100 * b for b in midp(4, 6)), abs=1e-4)
    assert mixed["lc_interval"] == "delta-mid-p"
    lc, lc_low, lc_high = (mixed[k] / 100 for k in ("lc_win_rate", "lc_ci_low", "lc_ci_high"))
    assert 0 < lc_low < lc < lc_high < 1

    # Never narrower than twice the 6 pairs' worth, whatever the GLM's delta-method error.
    floor_low, floor_high = midp_effective(lc * 12, 12)
    assert lc_high - lc_low >= floor_high - floor_low - 1e-9


def test_instruction_file_errors_name_the_item(tmp_path):
    path = tmp_path / "ins.jsonl"
    path.write_text('{"instruction": "Say hi."}\n{"prompt": "x"}\n')
    with pytest.raises(ValueError, match=r"instruction 1 \(line 2\) needs a non-empty instruction"):
        read_instructions(path)
    path.write_text('{"instruction": "a", "id": "q1"}\n{"instruction": "b", "id": "q1"}\n')
    with pytest.raises(ValueError, match="instruction id 'q1' appears twice"):
        read_instructions(path)


def test_judge_run_refuses_mismatched_answers(judge):
    protocol = load_protocol("alpacaeval-logprob")
    instructions = [Instruction("0", "Say hi.")]
    with pytest.raises(ValueError, match="has 2 answers for 1 instructions"):
        judge_run(judge, protocol, instructions, {"base": ["hi"], "m": ["a", "b"]}, baseline="base")
    with pytest.raises(ValueError, match="baseline 'x' has no answers"):
        judge_run(judge, protocol, instructions, {"base": ["hi"]}, baseline="x")


def test_single_answer_grades_are_scores_or_failures(judge, tmp_path):
    protocol = load_protocol("mt-bench-single")
    small = dataclasses.replace(protocol, verdict=dataclasses.replace(protocol.verdict, max_new_tokens=12))
    items = [GradeItem("q1", "What is 2+2?", "4"), GradeItem("q2", "Name a colour.", "Blue.")]
    cache = JudgmentCache(SqliteStore(tmp_path / "g.sqlite"), judge_key=judge_key(judge), protocol_sha256=small.sha256)
    grades = grade_answers(judge, small, items, cache=cache)
    for grade in grades:
        has_score = bool(re.search(small.verdict.score_regex, grade.raw or ""))
        assert grade.status in ("ok", "failed") and (grade.score is not None) == (grade.status == "ok")
        if grade.status == "failed":
            assert not has_score or "outside" in grade.error
    assert [g.score for g in grade_answers(judge, small, items, cache=cache)] == [g.score for g in grades]
    with pytest.raises(ValueError, match="item q3 \\(index 0\\): the answer is empty"):
        grade_answers(judge, small, [GradeItem("q3", "Hi?", " ")])
    with pytest.raises(ValueError, match="needs a single-answer protocol"):
        grade_answers(judge, load_protocol("arena-hard"), items)
