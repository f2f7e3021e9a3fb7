"""The arena leaderboard page: rating snapshots read from the arena app, with their charts."""
