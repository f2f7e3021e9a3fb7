"""The leaderboard's index is the benchmark table (:mod:`leaderboard.views_board`)."""

from leaderboard.views_board import leaderboard_board as leaderboard_index

__all__ = ["leaderboard_index"]
