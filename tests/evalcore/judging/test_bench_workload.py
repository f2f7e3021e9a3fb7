"""bench/judging.py's judge-run workload is built as judge_run builds its pairs."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO_ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_judging", REPO_ROOT / "bench" / "judging.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_workload_puts_one_baseline_answer_first_against_every_other_answer(shared_data):
    pairs, keys = _bench().run_workload(str(shared_data / "judges" / "mtbench_human_majority.json"), 12)
    assert len(pairs) == len(keys) >= 12
    by_question: dict[int, list] = {}
    for pair, key in zip(pairs, keys):
        by_question.setdefault(key, []).append(pair)
    assert keys == sorted(keys)  # a question's pairs are contiguous: the bench's slices keep them whole
    for group in by_question.values():
        assert len(group) >= 2 and len({p.question for p in group}) == 1
        assert len({p.answer_1 for p in group}) == 1  # the baseline
        candidates = [p.answer_2 for p in group]
        assert len(set(candidates)) == len(candidates) and group[0].answer_1 not in candidates
