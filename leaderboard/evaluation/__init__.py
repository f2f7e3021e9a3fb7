"""Evaluation: running the frozen suite on a submission, storing scores, re-scoring from stored samples."""
