"""A quick sufficient test that a reweighted set of battles has a finite Bradley-Terry MLE.

:func:`evalcore.ratings.bt.check_identifiable` decides it exactly (the comparison graph connected, the
"beat" graph strongly connected) with two sparse-graph passes over every pair: about 0.7 ms a call
at 20 models, once per bootstrap round. A bootstrap resample almost always keeps what the full data
has, so :class:`TwoWayTree` first checks only a spanning tree of pairs that, in the full data, each
beat the other (a tie, counted as half a win each way, is both): if every tree pair still has
evidence both ways after reweighting, every model reaches every other through wins and losses, so the
MLE is finite. When the test fails the caller runs the exact check; it never says "finite" wrongly.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import minimum_spanning_tree

from evalcore.ratings.battles import A_WINS, B_WINS, Battles


class TwoWayTree:
    """Built once per set of battles and base weights; :meth:`holds` per resample's weights."""

    def __init__(self, battles: Battles, weights: np.ndarray):
        m = battles.n_models
        a, b, outcome = battles.model_a.astype(np.int64), battles.model_b.astype(np.int64), battles.outcome
        lo = np.minimum(a, b)
        pair = lo * m + (a + b - lo)
        # Evidence for "lo beat hi" (up) and "hi beat lo" (down); a tie or a "both bad" is both.
        up = (outcome > B_WINS) | ((outcome == A_WINS) & (a == lo)) | ((outcome == B_WINS) & (b == lo))
        down = (outcome > B_WINS) | ((outcome == A_WINS) & (a != lo)) | ((outcome == B_WINS) & (b != lo))
        live = weights > 0
        # Per pair, the battles of its rarer direction: the tree takes the pairs a resample is least
        # likely to empty one way (a minimum spanning tree on 1 / that count).
        rarer = np.minimum(np.bincount(pair[up & live], minlength=m * m), np.bincount(pair[down & live], minlength=m * m))
        both = np.flatnonzero(rarer)
        self.spans = False
        if m < 2 or both.size < m - 1:
            return
        graph = coo_matrix((1.0 / rarer[both], (both // m, both % m)), shape=(m, m))
        forest = minimum_spanning_tree(graph).tocoo()
        if forest.nnz < m - 1:
            return  # the two-way pairs do not reach every model: no shortcut
        tree = np.sort(np.minimum(forest.row, forest.col).astype(np.int64) * m + np.maximum(forest.row, forest.col))
        slot = np.searchsorted(tree, pair)
        slot[slot == tree.size] = 0
        on_tree = tree[slot] == pair
        self.index = np.flatnonzero(on_tree)  # the battles of tree pairs
        k = slot[on_tree]
        self.up_bin = np.where(up[on_tree], 2 * k, 2 * tree.size)  # a battle that is no evidence goes to the last bin
        self.down_bin = np.where(down[on_tree], 2 * k + 1, 2 * tree.size)
        self.bins = 2 * tree.size + 1
        self.spans = True

    def holds(self, weights: np.ndarray) -> bool:
        """True when every tree pair has positive weight both ways (then the MLE is finite); False
        means "not shown here", not "not finite"."""
        if not self.spans:
            return False
        w = weights[self.index]
        total = np.bincount(self.up_bin, w, self.bins) + np.bincount(self.down_bin, w, self.bins)
        return bool(np.all(total[:-1] > 0))
