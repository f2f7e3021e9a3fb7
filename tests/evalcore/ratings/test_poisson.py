"""The bootstrap's table-inversion Poisson sampler against the Poisson law (evalcore.ratings.poisson)."""

import numpy as np
import pytest
from scipy import stats

from evalcore.ratings.bootstrap import CellResampler
from evalcore.ratings.counts import pair_counts_from_arrays
from evalcore.ratings.poisson import PoissonTable, support


class GivenUniforms:
    """A generator stand-in whose ``random(out=...)`` hands out chosen uniforms in row order."""

    def __init__(self, u: np.ndarray):
        self.u = np.asarray(u, dtype=np.float64).ravel()
        self.at = 0

    def random(self, out: np.ndarray) -> np.ndarray:
        flat = out.reshape(-1)
        flat[:] = self.u[self.at : self.at + flat.size]
        self.at += flat.size
        return out


MEANS = np.array([0.0, 0.3, 1.0, 2.0, 9.5, 10.0, 31.0, 150.0, 2_500.0, 123_456.0, 5e6])


def test_draws_are_the_inverse_of_the_poisson_cdf_for_any_uniform():
    """Every uniform maps to the smallest x with CDF(x) > u: scipy's ppf, including deep in both tails
    (where the guide's walk gives way to bisection)."""
    rng = np.random.default_rng(0)
    u = np.concatenate(
        [rng.random(4_000), [0.0, 1e-300, 1e-15, 1e-9, 0.5, 1 - 1e-9, 1 - 1e-15, 1 - 2.0**-53]]
    )
    table = PoissonTable(MEANS)
    drawn = table.draw(GivenUniforms(np.tile(u, MEANS.size)), u.size)
    assert drawn.shape == (MEANS.size, u.size) and drawn.dtype == np.float64
    for row, mean in enumerate(MEANS):
        expected = stats.poisson.ppf(u, mean) if mean > 0 else np.zeros_like(u)
        # scipy's ppf is the smallest x with CDF(x) >= u: differs from "> u" only where u is a CDF value;
        # compare where u is clear of the CDF at both candidate answers.
        clear = (np.abs(stats.poisson.cdf(expected, mean) - u) > 1e-9) & (
            np.abs(stats.poisson.cdf(expected - 1, mean) - u) > 1e-9
        )
        finite = np.isfinite(expected)
        lo, hi = support(np.array([mean]))
        # scipy answers its own tail (beyond 1e-20) where the table's top value takes it
        np.testing.assert_array_equal(
            drawn[row][clear & finite],
            np.clip(expected[clear & finite], lo[0], hi[0]),
            err_msg=f"mean {mean}",
        )
        assert clear.sum() > 0.99 * u.size


def test_uniforms_on_and_beside_each_cdf_value_fall_on_the_right_side():
    """u equal to a CDF value, or one float either side, maps to the first value whose CDF exceeds u: no
    guide points past its answer, no walk stops short."""
    for mean in MEANS:
        single = PoissonTable(np.array([mean]))
        values, cdf = single.cdf_table(0)
        if 0 < mean <= 1e5:  # scipy's CDF drifts by ~3e-8 at 5e6: checked against mpmath below
            np.testing.assert_allclose(cdf[:-1], stats.poisson.cdf(values[:-1], mean), rtol=1e-4, atol=1e-4)
        inner = cdf[:-1][(cdf[:-1] > 0) & (cdf[:-1] < 1)]
        if not inner.size:
            continue
        u = np.concatenate([inner, np.nextafter(inner, 2.0), np.nextafter(inner, -1.0)])
        drawn = single.draw(GivenUniforms(u), u.size)[0]
        np.testing.assert_array_equal(
            drawn, values[np.searchsorted(cdf, u, side="right")], err_msg=f"mean {mean}"
        )


def test_the_table_of_a_large_mean_matches_the_incomplete_gamma_function():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    values, cdf = PoissonTable(np.array([5e6])).cdf_table(0)
    for at in np.linspace(0, values.size - 2, 9).astype(int):
        exact = mpmath.gammainc(int(values[at]) + 1, 5e6, mpmath.inf, regularized=True)
        assert abs(cdf[at] - float(exact)) < 1e-4, (values[at], cdf[at], exact)  # measured: 2e-15


def test_draws_have_the_poisson_law():
    rng = np.random.default_rng(3)
    table = PoissonTable(MEANS)
    drawn = table.draw(rng, 100_000)
    for row, mean in enumerate(MEANS):
        x = drawn[row]
        if mean == 0:
            assert (x == 0).all()
            continue
        np.testing.assert_allclose(x.mean(), mean, rtol=5 * np.sqrt(mean / x.size) / mean)
        np.testing.assert_allclose(x.var(), mean, rtol=0.03)
        if mean <= 200:  # chi-square over the values with expected count >= 20
            values = np.arange(int(x.max()) + 1)
            expected = stats.poisson.pmf(values, mean) * x.size
            observed = np.bincount(x.astype(np.int64), minlength=values.size)
            cells = expected >= 20
            rest_obs, rest_exp = x.size - observed[cells].sum(), x.size - expected[cells].sum()
            chi2 = stats.chisquare(np.append(observed[cells], rest_obs), np.append(expected[cells], rest_exp))
            assert chi2.pvalue > 1e-3, (mean, chi2)


def test_rows_with_equal_means_draw_independently_and_reproducibly():
    means = np.array([4.0, 4.0, 4.0])
    a = PoissonTable(means).draw(np.random.default_rng(1), 5_000)
    b = PoissonTable(means).draw(np.random.default_rng(1), 5_000)
    np.testing.assert_array_equal(a, b)
    assert abs(np.corrcoef(a)[0, 1]) < 0.05 and abs(np.corrcoef(a)[1, 2]) < 0.05


@pytest.mark.parametrize(
    "means, message",
    [
        ([1.0, -1.0], "finite and non-negative"),
        ([1.0, np.nan], "finite and non-negative"),
        ([np.inf], "finite and non-negative"),
        ([[1.0]], "one-dimensional"),
    ],
)
def test_bad_means_are_refused(means, message):
    with pytest.raises(ValueError, match=message):
        PoissonTable(np.array(means))


def test_an_empty_table_draws_nothing():
    assert PoissonTable(np.array([])).draw(np.random.default_rng(0), 7).shape == (0, 7)


def test_cells_past_the_table_limit_use_numpys_sampler(monkeypatch):
    counts = pair_counts_from_arrays(["a", "b"], [0], [1], [300.0], [200.0], [50.0], [10.0])
    assert CellResampler(counts, "half").table is not None
    monkeypatch.setattr("evalcore.ratings.bootstrap.TABLE_MAX_COUNT", 250.0)
    resampler = CellResampler(counts, "half")
    assert resampler.table is None
    w, n = resampler.draw(20_000, np.random.default_rng(0))
    np.testing.assert_allclose(n.mean(), 560.0, rtol=0.01)
    np.testing.assert_allclose(w.mean(), 330.0, rtol=0.01)
