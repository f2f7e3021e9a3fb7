"""The leaderboard: submissions and their review, benchmark runs and scores, exports."""
