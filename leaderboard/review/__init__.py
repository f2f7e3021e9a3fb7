"""Admin review of submissions (flag, approve, hide, reject, with the audit log) and re-scoring requests."""
