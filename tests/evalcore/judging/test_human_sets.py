"""Both human-labelled sets read with read_pairs, and audit_report's agreement figures carry intervals."""

from __future__ import annotations

import pytest

from evalcore.judging import Judgment, audit_report, read_pairs


@pytest.mark.parametrize("name, count", [("mtbench_human_majority.json", 200), ("llmbar_natural.json", 100)])
def test_human_labelled_sets_are_readable(shared_data, name, count):
    pairs = read_pairs(shared_data / "judges" / name)
    assert len(pairs) == count and {p.label for p in pairs} == {1, 2}
    assert all(p.question.strip() and p.answer_1.strip() and p.answer_2.strip() for p in pairs)


def test_audit_agreement_has_wilson_and_kappa_intervals(shared_data):
    pairs = read_pairs(shared_data / "judges" / "mtbench_human_majority.json")[:40]
    labels = {p.pair_id: p.label for p in pairs}
    judgments = []
    for k, p in enumerate(pairs):  # a judge right on 3 of 4 pairs, in both orders
        prefers_1 = (p.label == 1) == (k % 4 != 3)
        judgments += [Judgment(p.pair_id, "ab", "x", "ok", p_first=0.9 if prefers_1 else 0.1),
                      Judgment(p.pair_id, "ba", "x", "ok", p_first=0.1 if prefers_1 else 0.9)]  # fmt: skip
    report = audit_report(judgments, labels, rounds=200, seed=0)
    accuracy = report["accuracy_swap_average"]
    assert accuracy["value"] == 0.75 and accuracy["interval"] == "wilson" and accuracy["n"] == 40
    assert accuracy["ci_low"] == pytest.approx(0.5981, abs=1e-3) and accuracy["ci_high"] == pytest.approx(0.8577, abs=1e-3)
    kappa = report["kappa"]
    assert kappa["interval"] == "bootstrap" and kappa["ci_low"] < kappa["value"] < kappa["ci_high"]
