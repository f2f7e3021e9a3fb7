"""RewardBench-style subsets: records may name a ``subset``; each subset gets its accuracy with a mid-p
interval (checked against scipy's binomial, tests/midp_reference.py; a tie counts 0, so accuracy is a
proportion) and a category is its subsets' accuracies weighted by their sizes (RewardBench's section score,
``calculate_scores_per_section`` in allenai/reward-bench: sum(n_s * acc_s) / sum(n_s)), which equals the
pooled share. ``data/subset_pairs.json`` is a small file written for these tests (not RewardBench data).
Hostile subsets are refused with one ValueError (one ``error:`` line from the CLI) naming the pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalcore.cli import main
from evalcore.reward import read_reward_pairs
from evalcore.reward.scoring import CATEGORY_RULE, PairReward, outcome_of, reward_report, weighted_section
from evalcore.reward.stored import verify_report
from tests.midp_reference import midp

DATA = Path(__file__).parent / "data" / "subset_pairs.json"
GOOD = {"input": "Say hi.", "output_1": "Hi!", "output_2": "Go away.", "label": 1}



def scored(pairs, margins):
    """Records with rewards chosen = 1 + margin, rejected = 1 (margin 0: a tie; None: skipped)."""
    out = []
    for pair, m in zip(pairs, margins):
        if m is None:
            out.append(PairReward(pair.pair_id, pair.category, pair.label, "skipped", reason="long", subset=pair.subset))
        else:
            out.append(PairReward(pair.pair_id, pair.category, pair.label, "ok", 1.0 + m, 1.0, outcome_of(1.0 + m, 1.0),
                                  subset=pair.subset))  # fmt: skip
    return out


def test_subsets_are_read_in_file_order():
    pairs, files = read_reward_pairs([f"mini={DATA}"])
    assert [p.subset for p in pairs] == ["chat-easy"] * 4 + ["chat-hard"] * 3 + ["refusals-made-up"] * 2 + ["math-small"] * 3
    assert files[0].pairs == 12 and pairs[5].pair_id == "mini/5"
    assert pairs[0].chosen == "Red is a primary colour." and pairs[1].chosen == "Paris is the capital of France."


def test_subset_figures_and_the_size_weighted_category():
    pairs, files = read_reward_pairs([f"mini={DATA}"])
    # chat-easy 3/4 correct; chat-hard 1 correct, 1 tie, 1 wrong; refusals 1 correct, 1 skipped; math 3/3
    margins = [1, 1, 1, -1, 1, 0, -1, 1, None, 1, 1, 1]
    report = reward_report(scored(pairs, margins), files)
    subsets = report["subsets"]["mini"]
    assert list(subsets) == ["chat-easy", "chat-hard", "math-small", "refusals-made-up"]  # by name
    expected = {"chat-easy": (3, 4), "chat-hard": (1, 3), "refusals-made-up": (1, 1), "math-small": (3, 3)}
    for name, (correct, n) in expected.items():
        figure = subsets[name]
        low, high = midp(correct, n)
        assert figure["n"] == n and figure["correct"] == correct and figure["interval"] == "mid-p"
        assert figure["value"] == pytest.approx(correct / n, abs=1e-4)
        assert (figure["ci_low"], figure["ci_high"]) == pytest.approx((low, high), abs=1e-4)
        assert "stderr" in figure
    assert subsets["chat-hard"]["tie"] == 1 and subsets["refusals-made-up"]["skipped"] == 1
    # the section score, RewardBench's way: (4 * 3/4 + 3 * 1/3 + 1 * 1 + 3 * 1) / 11 = 8 / 11
    category = report["categories"]["mini"]
    by_hand = (4 * 0.75 + 3 * (1 / 3) + 1 * 1.0 + 3 * 1.0) / 11
    assert weighted_section(subsets) == pytest.approx(by_hand, abs=1e-4) == pytest.approx(8 / 11, abs=1e-4)
    assert category["value"] == pytest.approx(by_hand, abs=1e-12) and category["n"] == 11
    assert (category["ci_low"], category["ci_high"]) == pytest.approx(midp(8, 11), abs=1e-4)
    assert report["category_rule"] == CATEGORY_RULE and "weighted by each subset's number" in CATEGORY_RULE


def test_verify_report_recomputes_subsets_and_refuses_a_tampered_one():
    pairs, files = read_reward_pairs([f"mini={DATA}"])
    records = scored(pairs, [1, 1, 1, -1, 1, 0, -1, 1, None, 1, 1, 1])
    report = {"kind": "classifier", "model": {"name": "m"}, "protocol": {}, **reward_report(records, files)}
    rows = [json.loads(json.dumps(r.as_dict())) for r in records]
    verified = verify_report(json.loads(json.dumps(report)), rows)
    assert verified["subsets"] == report["subsets"] and all("subset" in r for r in verified["records"])
    tampered = json.loads(json.dumps(report))
    tampered["subsets"]["mini"]["math-small"]["correct"] = 2
    with pytest.raises(ValueError, match="mini/math-small correct"):
        verify_report(tampered, rows)
    missing = json.loads(json.dumps(report))
    del missing["subsets"]["mini"]["chat-hard"]
    with pytest.raises(ValueError, match="no figure for 'mini/chat-hard'"):
        verify_report(missing, rows)
    invented = json.loads(json.dumps(report))
    invented["subsets"]["mini"]["made-up"] = invented["subsets"]["mini"]["chat-easy"]
    with pytest.raises(ValueError, match="names a subset that rewards.jsonl does not"):
        verify_report(invented, rows)
    bad_row = [dict(rows[0], subset={"x": 1}), *rows[1:]]
    with pytest.raises(ValueError, match="line 1: subset must be a name"):
        verify_report(json.loads(json.dumps(report)), bad_row)


def test_no_pair_right_has_an_interval_above_zero():
    """Every pair of a subset wrong or tied: accuracy 0 of 4 with the mid-p upper bound 1 - 0.05^(1/4) (it
    solves (1 - p)^4 / 2 = 0.025), not a point at 0; n recorded."""
    pairs, files = read_reward_pairs([f"mini={DATA}"])
    report = reward_report(scored(pairs, [-1, -1, 0, -1, 1, 1, 1, 1, 1, 1, 1, 1]), files)
    easy = report["subsets"]["mini"]["chat-easy"]
    assert (easy["value"], easy["n"], easy["tie"], easy["interval"]) == (0.0, 4, 1, "mid-p")
    assert easy["ci_low"] == 0.0 and easy["ci_high"] == pytest.approx(1 - 0.05**0.25, abs=1e-4) and easy["ci_high"] > 0
    assert easy["stderr"] is None  # [0, 0.53] about 0 is lopsided


def test_a_report_written_with_wilson_intervals_still_verifies():
    """A report.json from before the intervals were mid-p names ``"wilson"``: its intervals are not compared
    (they follow from the counts, which are) and the verified report holds the recomputed mid-p ones; a
    report that names mid-p must match them."""
    pairs, files = read_reward_pairs([f"mini={DATA}"])
    records = scored(pairs, [1, 1, 1, -1, 1, 0, -1, 1, None, 1, 1, 1])
    report = json.loads(json.dumps({"kind": "classifier", "model": {"name": "m"}, "protocol": {}, **reward_report(records, files)}))
    rows = [json.loads(json.dumps(r.as_dict())) for r in records]
    old = json.loads(json.dumps(report))
    for figure in [old["overall"], *old["categories"].values(), *old["subsets"]["mini"].values()]:
        figure.update(interval="wilson", ci_low=figure["ci_low"] + 0.01)
    verified = verify_report(old, rows)
    assert verified["overall"]["interval"] == "mid-p"
    assert (verified["overall"]["ci_low"], verified["overall"]["ci_high"]) == pytest.approx(midp(8, 11), abs=1e-4)
    report["overall"]["ci_low"] += 0.01
    with pytest.raises(ValueError, match="overall ci_low"):
        verify_report(report, rows)


def test_files_without_subsets_report_none(tmp_path):
    pairs, files = read_reward_pairs([f"plain={_write(tmp_path, [GOOD, GOOD])}"])
    assert all(p.subset is None for p in pairs)
    assert reward_report(scored(pairs, [1, -1]), files)["subsets"] == {}


def _write(folder: Path, rows) -> Path:
    path = folder / "pairs.json"
    path.write_text(json.dumps(rows))
    return path


@pytest.mark.parametrize(("rows", "problem"), [
    ([{**GOOD, "subset": 3}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": None}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": ["a"]}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": {"a": 1}}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": ""}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": "../etc"}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": "a b"}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": "x" * 65}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": "x" * 1_000_000}], "pair 0: 'subset' must be a name"),
    ([{**GOOD, "subset": "ok"}, GOOD], "pair 1 has no 'subset' while pair 0 has one"),
    ([GOOD, {**GOOD, "subset": "ok"}], "pair 0 has no 'subset' while pair 1 has one"),
    ([{**GOOD, "subset": f"s{i}"} for i in range(300)], "more than 256 distinct subsets"),
])  # fmt: skip
def test_hostile_subsets(tmp_path, capsys, rows, problem):
    path = _write(tmp_path, rows)
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")) as caught:
        read_reward_pairs([str(path)])
    assert len(str(caught.value)) < 400  # a huge value is not echoed back
    out = tmp_path / "out"
    code = main(["reward", "--model", "hf", "--model-args", f"path={tmp_path / 'no-model'}", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and problem in err and err.count("\n") == 1, err
    assert not out.exists()


def test_jsonl_subsets(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps({**GOOD, "subset": s}) for s in ("a", "b", "a")) + "\n\n")
    pairs, _ = read_reward_pairs([str(path)])
    assert [p.subset for p in pairs] == ["a", "b", "a"]
