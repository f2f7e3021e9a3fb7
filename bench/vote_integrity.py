"""Benchmark the vote-integrity statistics at arena scale, against plain-Python versions in the same run.

    OMP_NUM_THREADS=1 .venv/bin/python bench/vote_integrity.py [--votes 1000000] [--voters 50000]

Data: ``--votes`` battles between 100 models (strengths N(0, 1) logits, 10% ties) from ``--voters``
voters, and Zipf-distributed prompt codes (a few prompts sent very often). Timed: the anomalous-voter test
(:func:`evalcore.ratings.voters_test`, all three tests) against a plain-Python loop over votes computing
one of them (the coin-flip likelihood-ratio z-score per voter), and the duplicate-prompt mask (:func:`evalcore.ratings.duplicate_prompt_mask`) against a
``collections.Counter`` version written as one would by hand; both pairs must agree.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalcore.ratings import (  # noqa: E402
    BASE_RATING,
    ELO_PER_LOGIT,
    duplicate_prompt_mask,
    simulate_battles,
    voters_test,
)


def plain_voter_sums(voters, a, b, outcome, theta, tie):
    """Per voter: the coin-flip log-likelihood-ratio z-score, written as a loop over votes."""
    sums: dict[int, list[float]] = {}
    for v, i, j, o in zip(voters.tolist(), a.tolist(), b.tolist(), outcome.tolist()):
        p_a = 1 / (1 + math.exp(-(theta[i] - theta[j])))
        probs = ((1 - tie) * p_a, (1 - tie) * (1 - p_a), tie)
        half = 0.5 * (1 - tie)
        llr = (math.log(half / probs[0]), math.log(half / probs[1]), 0.0)
        mean = sum(p * x for p, x in zip(probs, llr))
        var = sum(p * x * x for p, x in zip(probs, llr)) - mean * mean
        k = 0 if o == 0 else 1 if o == 1 else 2
        acc = sums.setdefault(v, [0.0, 0.0])
        acc[0] += llr[k] - mean
        acc[1] += var
    return {v: (d / math.sqrt(s) if s > 0 else 0.0) for v, (d, s) in sums.items()}


def plain_duplicates(codes, percentile):
    counts = Counter(c for c in codes if c >= 0)
    ordered = sorted(counts.values())
    threshold = ordered[math.ceil(percentile / 100 * (len(ordered) - 1))]
    seen, dropped = set(), 0
    for c in codes:
        if c >= 0 and counts[c] > threshold:
            if c in seen:
                dropped += 1
            seen.add(c)
    return dropped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--voters", type=int, default=50_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    theta = rng.normal(0, 1, 100)
    sim = simulate_battles(BASE_RATING + ELO_PER_LOGIT * theta, args.votes, rng=rng, tie_rate=0.1)
    voters = rng.integers(0, args.voters, args.votes)
    codes = rng.zipf(1.5, args.votes).astype(np.int64)

    start = time.perf_counter()
    result = voters_test(voters, sim.model_a, sim.model_b, sim.outcome, theta, models=sim.models, tie_rate=0.1,
                         rng=np.random.default_rng(1))  # fmt: skip
    ours = time.perf_counter() - start
    start = time.perf_counter()
    plain = plain_voter_sums(voters, sim.model_a, sim.model_b, sim.outcome, theta, 0.1)
    theirs = time.perf_counter() - start
    print(f"voters_test: {args.votes:,} votes, {len(result.voters):,} voters tested: {ours:.2f} s; "
          f"plain Python (one of the three statistics): {theirs:.2f} s; ratio {theirs / ours:.1f}x; "
          f"honest flag rate {result.flagged.mean():.4f}")  # fmt: skip
    assert len(plain) >= len(result.voters)

    start = time.perf_counter()
    mask = duplicate_prompt_mask(codes)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    dropped = plain_duplicates(codes.tolist(), 99.9)
    theirs = time.perf_counter() - start
    assert dropped == mask.dropped, (dropped, mask.dropped)
    print(f"duplicate_prompt_mask: {args.votes:,} votes, {mask.dropped:,} dropped: {ours:.3f} s; "
          f"Counter version: {theirs:.3f} s; ratio {theirs / ours:.1f}x (same votes dropped)")


if __name__ == "__main__":
    main()
