"""Evaluation runs as published: the benchmarks' metadata, run protocol pages, samples, comparisons."""
