"""Leaderboard tasks (benchmark runs, judge runs) run on the worker runtime."""
