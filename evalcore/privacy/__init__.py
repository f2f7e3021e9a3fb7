"""Privacy: personal data and secrets out of what Podium publishes (evalcore.privacy.redact)."""
