"""Small helpers every app may use and that use no app: streamed downloads, health probes, URL redaction.

Layer: below arena and leaderboard, above workers and evalcore (enforced by import-linter)."""
