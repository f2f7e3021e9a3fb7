"""Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code")."""

from __future__ import annotations

import numpy as np

from evalcore.boundary.validation import check_integer, integer_array


def pass_at_k(n, c, k: int) -> np.ndarray | float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct.

    ``1 - C(n - c, k) / C(n, k)``, computed in the numerically stable product form
    ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)`` (no huge binomials).

    Parameters
    ----------
    n, c : int or array_like of int, shape (p,)
        Samples drawn and samples correct per problem; ``0 <= c <= n`` and ``k <= n``. Integers only
        (Python or numpy): a float such as 10.0 or a bool is a ValueError.
    k : int
        At least 1.

    Returns
    -------
    float or ndarray, shape (p,)
    """
    n_arr = integer_array(n, "n")
    c_arr = integer_array(c, "c")
    k = check_integer(k, "k", minimum=1)
    n_b, c_b = np.broadcast_arrays(n_arr, c_arr)
    if np.any(c_b < 0) or np.any(c_b > n_b):
        raise ValueError("need 0 <= c <= n for every problem")
    if np.any(n_b < k):
        raise ValueError(f"k={k} exceeds the number of samples n for some problem")
    out = np.empty(n_b.shape, dtype=np.float64)
    for idx in np.ndindex(n_b.shape):
        nn, cc = int(n_b[idx]), int(c_b[idx])
        if nn - cc < k:
            out[idx] = 1.0
        else:
            i = np.arange(nn - cc + 1, nn + 1, dtype=np.float64)
            out[idx] = 1.0 - float(np.prod(1.0 - k / i))
    return float(out) if out.ndim == 0 else out
