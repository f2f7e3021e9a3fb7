"""Podium's evaluation core: ratings, statistics, the benchmark engine and model backends.

A plain library: no Django, no ORM, no settings. An import-linter contract enforces this.
"""

__version__ = "0.1.0"
