"""The arena: anonymous side-by-side battles, votes, and rating snapshots. Owns the model catalogue."""
