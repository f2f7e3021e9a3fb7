"""Length-controlled win rate: AlpacaEval 2.0 published numbers, a verbosity simulation, the ``lc`` command.

Published values: ``leaderboard_published.csv`` (tatsu-lab/alpaca_eval, AlpacaEval 2.0 leaderboard rows
for the 19 models in ``annotations_compact.csv``). Raw win rates must match to 1e-6; LC win rates use
a difficulty estimated from these 19 models instead of AlpacaEval's own file and regularisation rows,
so we require Spearman >= 0.95 and a mean absolute difference under 3 points (measured: 0.986 and 1.5).
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from evalcore.cli import main
from evalcore.ratings.lc import (
    discrete_win_rate_estimate,
    lc_estimate,
    length_controlled_win_rate,
    win_rate_estimate,
)
from evalcore.ratings.lc_annotations import annotations_from_arrays, read_lc_annotations
from tests.midp_reference import midp_effective, symmetric_se

BASELINE = "gpt4_1106_preview"


@pytest.fixture(scope="module")
def alpaca(data_dir):
    ann = read_lc_annotations(data_dir / "alpacaeval" / "annotations_compact.csv")
    with open(data_dir / "alpacaeval" / "leaderboard_published.csv", newline="") as fh:
        published = {row["model"]: row for row in csv.DictReader(fh)}
    return ann, published, length_controlled_win_rate(ann, baseline=BASELINE)


def test_raw_win_rates_match_published(alpaca):
    ann, published, result = alpaca
    assert len(result.models) == 19
    for k, model in enumerate(result.models):
        row = published[model]
        assert result.win_rate[k] == pytest.approx(float(row["win_rate"]), abs=1e-6)
        assert result.discrete_win_rate[k] == pytest.approx(float(row["discrete_win_rate"]), abs=1e-6)
        assert result.standard_error[k] == pytest.approx(float(row["standard_error"]), abs=1e-6)
        assert result.n[k] == int(row["n_total"])


def test_lc_win_rates_agree_with_published(alpaca):
    _, published, result = alpaca
    ours = result.lc_win_rate
    theirs = np.array([float(published[m]["length_controlled_winrate"]) for m in result.models])
    assert spearmanr(ours, theirs).statistic >= 0.95
    assert np.mean(np.abs(ours - theirs)) < 3.0
    base = result.models.index(BASELINE)
    assert result.lc_win_rate[base] == 50.0 and result.win_rate[base] == 50.0
    assert result.difficulty_source == "estimated"
    assert np.all(result.lc_standard_error[np.arange(19) != base] > 0)


def test_difficulty_file_is_used(alpaca, tmp_path):
    ann, _, estimated = alpaca
    # A constant difficulty removes the instruction term; the fit must still run and differ.
    flat = {s: 0.0 for s in ann.instructions}
    result = length_controlled_win_rate(ann, baseline=BASELINE, difficulty=flat)
    assert result.difficulty_source == "file"
    assert not np.allclose(result.lc_win_rate, estimated.lc_win_rate)
    with pytest.raises(ValueError, match="no value for instruction"):
        length_controlled_win_rate(ann, baseline=BASELINE, difficulty={"x": 1.0})


def _verbose_judge_annotations(seed: int = 0):
    """Equal-quality 'verbose' model (2.2x longer answers) judged with a length weight phi = 1.2."""
    rng = np.random.default_rng(seed)
    q = 805
    difficulty = rng.normal(0.0, 1.0, q)
    quality = {"verbose": 0.0, "plain": 0.0, "weak": -1.0, "strong": 0.7}
    length_ratio = {"verbose": 2.2, "plain": 1.0, "weak": 0.8, "strong": 1.1}
    cols = {k: [] for k in ("model", "instruction_id", "len_output_1", "len_output_2", "preference")}
    for name, theta in quality.items():
        len_base = rng.lognormal(np.log(1000), 0.4, q)
        len_model = rng.lognormal(np.log(1000 * length_ratio[name]), 0.4, q)
        delta = len_base - len_model
        eta = theta + difficulty - 1.2 * np.tanh(delta / delta.std(ddof=1))
        won = rng.random(q) < 1 / (1 + np.exp(-eta))
        cols["model"] += [name] * q
        cols["instruction_id"] += [f"i{k}" for k in range(q)]
        cols["len_output_1"] += list(len_base)
        cols["len_output_2"] += list(len_model)
        cols["preference"] += list(1.0 + won)
    return annotations_from_arrays(*cols.values())


def test_verbose_model_of_equal_quality():
    """Issue 3: raw win rate about 65%, LC about 50%."""
    result = length_controlled_win_rate(_verbose_judge_annotations(), baseline="baseline")
    k = result.models.index("verbose")
    assert 60 < result.win_rate[k] < 70
    assert abs(result.lc_win_rate[k] - 50) < max(2.5 * result.lc_standard_error[k], 3.0)
    assert abs(result.lc_win_rate[k] - 50) < 8
    plain = result.models.index("plain")
    assert abs(result.lc_win_rate[plain] - result.win_rate[plain]) < 3  # no length gap, little change


def test_lc_command(data_dir, capsys):
    path = data_dir / "alpacaeval" / "annotations_compact.csv"
    assert main(["lc", str(path), "--baseline", BASELINE]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(rows[0]) == [
        "model",
        "win_rate",
        "win_rate_ci_low",
        "win_rate_ci_high",
        "discrete_win_rate",
        "discrete_ci_low",
        "discrete_ci_high",
        "lc_win_rate",
        "lc_ci_low",
        "lc_ci_high",
        "lc_standard_error",
        "n",
    ]
    assert rows[0]["model"] == "FuseChat-Llama-3.1-8B-Instruct" and len(rows) == 19
    for row in rows:  # a standard error printed beside the interval is the interval's, or none
        low, high, value = float(row["lc_ci_low"]), float(row["lc_ci_high"]), float(row["lc_win_rate"])
        assert low <= value <= high and int(row["n"]) > 0
        se = symmetric_se(value, low, high)
        if se is None:  # from the printed (rounded) bounds: a borderline case may fall either way
            assert row["lc_standard_error"] == "" or abs(float(row["lc_standard_error"]) - (high - low) / 3.92) < 1e-3
        else:
            assert float(row["lc_standard_error"]) == pytest.approx(se, abs=2e-4)


def _bounded_mean_bounds(values) -> tuple[float, float]:
    """The mid-p interval at n / deff, deff = s^2 / (m (1 - m)) held in [0.5, 1] (the design of
    evalcore.stats.estimates ``mid-p-effective``), in percent."""
    y = np.asarray(values, dtype=float)
    m, n = y.mean(), y.size
    binary = np.all((y == 0) | (y == 1))
    ratio = 1.0 if binary else min(1.0, max(0.5, y.var(ddof=1) / (m * (1 - m))))
    low, high = midp_effective(m * n / ratio, n / ratio)
    return 100 * low, 100 * high


def test_every_rate_has_an_interval(alpaca):
    ann, _, result = alpaca
    base = result.models.index(BASELINE)
    for k, model in enumerate(result.models):
        y = ann.preference[ann.model == k] - 1.0
        assert (result.win_rate_ci_low[k], result.win_rate_ci_high[k]) == pytest.approx(_bounded_mean_bounds(y), abs=1e-4)
        discrete = np.where(y > 0.5, 1.0, np.where(y == 0.5, 0.5, 0.0))
        assert (result.discrete_ci_low[k], result.discrete_ci_high[k]) == pytest.approx(_bounded_mean_bounds(discrete), abs=1e-4)
        if k == base:
            assert result.lc_ci_low[k] == result.lc_ci_high[k] == 50.0  # by construction
            continue
        p, se = result.lc_win_rate[k] / 100, result.lc_standard_error[k] / 100
        effective = min(2 * result.n[k], p * (1 - p) / se**2)
        expected = [100 * b for b in midp_effective(p * effective, effective)]
        assert (result.lc_ci_low[k], result.lc_ci_high[k]) == pytest.approx(expected, abs=1e-4), model
        assert 0 < result.lc_ci_low[k] < result.lc_win_rate[k] < result.lc_ci_high[k] < 100


def test_lc_interval_stays_inside_0_100_and_never_claims_more_than_twice_the_pairs():
    """99% with a delta-method error of 2 points: 99 +- 1.96 * 2 would reach 102.9; mid-p at the effective
    size 0.99 * 0.01 / 0.02^2 = 24.75 stays inside and is lopsided, so it has no standard error."""
    estimate = lc_estimate(99.0, 2.0, 30)
    low, high = midp_effective(0.99 * 24.75, 24.75)
    assert (estimate.ci_low, estimate.ci_high) == pytest.approx((100 * low, 100 * high), abs=1e-4)
    assert 0 < estimate.ci_low < 99.0 < estimate.ci_high <= 100
    assert (estimate.method, estimate.n, estimate.se) == ("delta-mid-p", 30, None)
    near_half = lc_estimate(50.0, 5.0, 300)  # symmetric there: its standard error is close to the delta-method one
    assert near_half.se == pytest.approx(5.0, rel=0.05)
    # A GLM that fits 4 pairs perfectly: a delta-method error of ~0 may not shrink the interval below 8 pairs' worth.
    collapsed = lc_estimate(0.02, 1e-6, 4)
    # (0 of 8 would give 100 (1 - 0.05^(1/8)) = 31.2; 0.0016 of 8 a hair more)
    assert collapsed.effective_n == 8 and 31.2 < collapsed.ci_high < 31.5 and collapsed.ci_low < 1e-9


def test_a_model_that_never_wins_has_an_interval_above_zero():
    """0 of 5 preferred: the mid-p upper bound solves (1 - p)^5 / 2 = 0.025, 100 (1 - 0.05^(1/5)) = 45.07%
    (every preference below 0.5 is a loss for the discrete win rate)."""
    for estimate in (win_rate_estimate([0.0] * 5), discrete_win_rate_estimate([0.0, 0.2, 0.4, 0.1, 0.0])):
        assert (estimate.value, estimate.n, estimate.method, estimate.ci_low) == (0.0, 5, "mid-p", 0.0)
        assert estimate.ci_high == pytest.approx(100 * (1 - 0.05**0.2), abs=1e-4) and estimate.ci_high > 0


@pytest.mark.parametrize(
    "content, message",
    [
        ("model,instruction_id,len_output_1,len_output_2\n", "column 'preference': missing column"),
        ("model,instruction_id,len_output_1,len_output_2,preference\n", "header but no rows"),
        ("", "the file is empty"),
        (
            "model,instruction_id,len_output_1,len_output_2,preference\na,i1,10,20,2.5\n",
            "row 1, column 'preference': 2.5 is not in [1, 2] (or 0)",  # a plain number, not np.float64(2.5)
        ),
        (
            "model,instruction_id,len_output_1,len_output_2,preference\na,i1,ten,20,2\n",
            "row 1, column 'len_output_1'",
        ),
        ("model,instruction_id,len_output_1,len_output_2,preference\n,i1,10,20,2\n", "row 1, column 'model'"),
        (
            "model,instruction_id,generator_1,len_output_1,len_output_2,preference\na,i1,gpt4,10,20,2\n",
            "baseline 'base' is not the annotations' output_1 generator",
        ),
        ("model,instruction_id,len_output_1,len_output_2,preference\na,i1,10,20,2\n", "at least two models"),
    ],
)
def test_lc_command_hostile_input(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["lc", str(path), "--baseline", "base"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_lc_command_with_difficulty_file(data_dir, tmp_path, capsys):
    ann = read_lc_annotations(data_dir / "alpacaeval" / "annotations_compact.csv")
    path = tmp_path / "difficulty.csv"
    rng = np.random.default_rng(0)
    path.write_text(
        "instruction_id,difficulty\n" + "".join(f"{s},{rng.normal():.6f}\n" for s in ann.instructions)
    )
    annotations = data_dir / "alpacaeval" / "annotations_compact.csv"
    assert (
        main(["lc", str(annotations), "--baseline", BASELINE, "--difficulty", str(path), "--format", "json"])
        == 0
    )
    out, err = capsys.readouterr()
    assert "difficulty file" in err
    assert len(json.loads(out)["models"]) == 19
    path.write_text("instruction_id,difficulty\nabc,hard\n")
    assert main(["lc", str(annotations), "--baseline", BASELINE, "--difficulty", str(path)]) == 2
    assert "row 1, column 'difficulty': not a number" in capsys.readouterr().err
