"""Leaderboard data (submissions, runs, scores) arrives with the leaderboard issue."""
