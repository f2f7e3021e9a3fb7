"""Style control: the markdown counter, and recovering equal quality behind a verbosity bias."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.ratings import ELO_PER_LOGIT, Battles, aggregate, fit_bradley_terry, simulate_battles
from evalcore.ratings.markdown import count_tokens, markdown_style_counts, style_vector
from evalcore.ratings.style import fit_style_controlled, style_differences

ANSWER = """# Title

Some **bold** text and __more bold__, and `**not bold in code**`.

## Steps
1. first
2) second
- third with **two** **spans**
* * *

```python
# not a header
- not a list item
**not bold**
```

~~~
# also code
~~~
#hashtag is not a header
"""


def test_markdown_counts_ignore_code():
    counts = markdown_style_counts(ANSWER)
    assert counts["headers"] == 2
    assert counts["list_items"] == 3
    assert counts["bold"] == 4
    assert counts["tokens"] == count_tokens(ANSWER)
    assert markdown_style_counts("plain", tokens=17)["tokens"] == 17
    np.testing.assert_array_equal(style_vector("- a\n- b"), [4, 0, 2, 0])
    assert markdown_style_counts("")["tokens"] == 0


def test_style_differences_and_validation():
    d = style_differences(np.array([[3.0, 0.0]]), np.array([[1.0, 0.0]]))
    np.testing.assert_allclose(d, [[2 / 5, 0.0]])
    with pytest.raises(ValueError, match="non-negative"):
        style_differences(np.array([[-1.0]]), np.array([[1.0]]))


@pytest.fixture(scope="module")
def verbose_votes():
    """m0 and m1 are equally good; m0 writes three times longer and the voter likes length."""
    rng = np.random.default_rng(0)
    true = np.array([0.0, 0.0, 50.0, -50.0])
    n = 12_000
    base = simulate_battles(true, n, rng=rng)
    mean_len = np.array([900.0, 300.0, 400.0, 400.0])
    style_a = np.zeros((n, 4))
    style_b = np.zeros((n, 4))
    style_a[:, 0] = rng.gamma(4.0, mean_len[base.model_a] / 4)
    style_b[:, 0] = rng.gamma(4.0, mean_len[base.model_b] / 4)
    style_a[:, 2] = rng.poisson(3.0, n)
    style_b[:, 2] = rng.poisson(3.0, n)
    diff = style_differences(style_a, style_b)[:, 0]
    eta = (true[base.model_a] - true[base.model_b]) / ELO_PER_LOGIT + 1.5 * diff
    outcome = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 0, 1).astype(np.int8)
    return Battles(base.models, base.model_a, base.model_b, outcome, None, style_a, style_b), true


def test_style_control_removes_verbosity_advantage(verbose_votes):
    battles, true = verbose_votes
    plain = fit_bradley_terry(aggregate(battles))
    assert plain.ratings[0] - plain.ratings[1] > 60  # length bias makes m0 look better
    controlled = fit_style_controlled(battles, rounds=60, seed=0)
    r = controlled.ratings
    assert r.method == "style" and r.interval == "bootstrap"
    # The gap's sampling SD here is about 8 points (measured over seeds); plain BT is off by 100+.
    assert abs((r.ratings[0] - r.ratings[1]) - (true[0] - true[1])) < 25
    assert r.ci_low[0] < r.ci_high[1] and r.ci_low[1] < r.ci_high[0]  # equal quality: intervals overlap
    rows = {row["coefficient"]: row for row in controlled.coefficient_rows()}
    assert rows["tokens"]["ci_low"] > 0.3  # the length preference is found
    assert rows["list_items"]["ci_low"] < 0 < rows["list_items"]["ci_high"]  # the irrelevant one is not
    sandwich = fit_style_controlled(battles)
    assert sandwich.ratings.interval == "sandwich"
    np.testing.assert_allclose(sandwich.coefficients, controlled.coefficients)
    np.testing.assert_allclose(
        sandwich.coef_se, (controlled.coef_ci_high - controlled.coef_ci_low) / 3.92, rtol=0.5
    )


def test_style_control_needs_style_columns():
    battles = simulate_battles(np.zeros(3), 100, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="needs style counts"):
        fit_style_controlled(battles)


def test_style_bootstrap_drops_degenerate_rounds():
    """Model c played twice (one win, one loss): many resamples leave it unbeaten or winless."""
    zero = {f"{f}_{s}": 0 for f in ("headers", "list_items", "bold") for s in ("a", "b")}
    records = [
        dict(zero, model_a="a", model_b="b", winner=("model_a", "model_b")[k % 2], tokens_a=k, tokens_b=3)
        for k in range(60)
    ]
    records += [
        dict(zero, model_a="c", model_b="a", winner="model_b", tokens_a=1, tokens_b=3),
        dict(zero, model_a="c", model_b="b", winner="model_a", tokens_a=1, tokens_b=3),
    ]
    from evalcore.ratings import battles_from_records

    result = fit_style_controlled(battles_from_records(records), rounds=100, seed=0).ratings
    dropped = 100 - result.bootstrap_rounds
    assert 0 < dropped < 100
    assert any(f"{dropped} of 100 bootstrap rounds" in note for note in result.notes)
    assert np.all(np.isfinite(result.ci_low)) and np.all(np.isfinite(result.ci_high))


def test_a_start_near_the_optimum_reaches_the_same_fit_in_fewer_iterations(verbose_votes):
    """The arena's next refit starts Newton from the last refit's fit: the same optimum (to the fit's
    tolerance), fewer passes over the battles; a model the start does not name starts from plain BT."""
    battles, _ = verbose_votes
    cold = fit_style_controlled(battles)
    columns = (battles.model_a, battles.model_b, battles.outcome, battles.tstamp, battles.style_a, battles.style_b)
    fewer = Battles(battles.models, *(None if c is None else c[:-40] for c in columns))
    earlier = fit_style_controlled(fewer)
    strengths = dict(zip(earlier.ratings.models, earlier.ratings.ratings / ELO_PER_LOGIT))
    warm = fit_style_controlled(battles, start=(strengths, earlier.coefficients))
    np.testing.assert_allclose(warm.ratings.ratings, cold.ratings.ratings, rtol=0, atol=1e-4)
    np.testing.assert_allclose(warm.coefficients, cold.coefficients, rtol=0, atol=1e-4)
    assert warm.ratings.iterations < cold.ratings.iterations
    del strengths[battles.models[0]]
    partly = fit_style_controlled(battles, start=(strengths, earlier.coefficients))
    np.testing.assert_allclose(partly.ratings.ratings, cold.ratings.ratings, rtol=0, atol=1e-4)


@pytest.mark.parametrize(
    "start, message",
    [
        (({"m0": 0.0}, [0.1]), "coefficients must be 4 finite numbers"),
        (({"m0": 0.0}, [0.1, np.nan, 0, 0]), "coefficients must be 4 finite numbers"),
        (({"m0": np.inf}, [0, 0, 0, 0]), "strengths must be finite"),
        (({"m0": "strong"}, [0, 0, 0, 0]), "start must be"),
        ("not a pair", "start must be"),
    ],
)
def test_a_malformed_start_is_refused(verbose_votes, start, message):
    battles, _ = verbose_votes
    with pytest.raises(ValueError, match=message):
        fit_style_controlled(battles, start=start)
