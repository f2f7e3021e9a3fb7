"""Benchmark evalcore.ratings on an Arena-sized vote file, against evalica in the same run.

    OMP_NUM_THREADS=1 .venv/bin/python bench/ratings.py            # generates bench/out/arena_1.67m.csv once
    .venv/bin/python bench/ratings.py --rounds 1000 --evalica-bootstrap 5

Data: 129 models, about 3,460 distinct pairs with skewed (log-normal) pair frequencies, 1.67 million
battles in the FastChat layout with timestamps, 17% ties and 9% both-bad ties. Timings: CSV read, pair
aggregation, BT point fit, 1,000 bootstrap rounds, online Elo, the ``rate`` command end to end (its own
process), and evalica's Bradley-Terry, Elo and bootstrap on the same battles. Peak memory is the
resident-set high-water mark of this process before evalica runs (the data set is generated in a child
process so it does not count). FastChat's figures (``rating_systems.py``, 8.8 s point fit including
preprocessing, 71 s per 100 bootstrap rounds on these 2-core machines) come from issue 3.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalcore.ratings import (  # noqa: E402
    Battles,
    aggregate,
    bootstrap_bradley_terry,
    elo_ratings,
    fit_bradley_terry,
    read_battles,
    write_battles_csv,
)

FASTCHAT_POINT_S = 8.8
FASTCHAT_PER_ROUND_S = 71.0 / 100


def generate(path: Path, *, n_battles: int, n_models: int, n_pairs: int, seed: int) -> None:
    """Write an Arena-like battle CSV to ``path``."""
    rng = np.random.default_rng(seed)
    ratings = np.sort(rng.normal(1100.0, 110.0, n_models))[::-1]
    iu, ju = np.triu_indices(n_models, k=1)
    # Keep a spanning chain so the graph is connected, then sample the rest of the pairs.
    chain = np.flatnonzero(ju == iu + 1)
    rest = rng.choice(np.setdiff1d(np.arange(iu.size), chain), size=n_pairs - chain.size, replace=False)
    chosen = np.concatenate([chain, rest])
    weights = rng.lognormal(0.0, 1.5, chosen.size)
    per_pair = rng.multinomial(n_battles - chosen.size, weights / weights.sum()) + 1
    a = np.repeat(iu[chosen], per_pair)
    b = np.repeat(ju[chosen], per_pair)
    flip = rng.random(n_battles) < 0.5
    a, b = np.where(flip, b, a), np.where(flip, a, b)
    p_a = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / 400))
    u = rng.random(n_battles)
    outcome = np.where(u < p_a, 0, 1).astype(np.int8)
    tie = rng.random(n_battles)
    outcome[tie < 0.26] = 2
    outcome[tie < 0.09] = 3
    order = rng.permutation(n_battles)
    models = tuple(f"model-{k:03d}" for k in range(n_models))
    battles = Battles(
        models, a[order].astype(np.int32), b[order].astype(np.int32), outcome[order],
        np.sort(rng.uniform(1.7e9, 1.75e9, n_battles)),
    )  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    write_battles_csv(battles, tmp)
    tmp.replace(path)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(label: str, fn, results: dict):
    start = time.perf_counter()
    value = fn()
    results[label] = time.perf_counter() - start
    print(f"{label:<44s} {results[label]:8.3f} s", flush=True)
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "bench" / "out" / "arena_1.67m.csv")
    parser.add_argument("--battles", type=int, default=1_670_000)
    parser.add_argument("--models", type=int, default=129)
    parser.add_argument("--pairs", type=int, default=3_460)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument(
        "--evalica-bootstrap", type=int, default=3, help="evalica bootstrap resamples to time"
    )
    parser.add_argument("--skip-evalica", action="store_true")
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)

    if args.generate_only:
        generate(args.data, n_battles=args.battles, n_models=args.models, n_pairs=args.pairs, seed=0)
        return 0
    if not args.data.exists():
        print(f"generating {args.data} ...", flush=True)
        subprocess.run([sys.executable, __file__, "--generate-only", "--data", str(args.data),
                        "--battles", str(args.battles), "--models", str(args.models), "--pairs", str(args.pairs)],
                       check=True)  # fmt: skip
    size_mb = args.data.stat().st_size / 1e6
    print(
        f"data: {args.data} ({size_mb:.0f} MB); OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )
    t: dict[str, float] = {}
    battles = timed("read CSV (read_battles)", lambda: read_battles(args.data), t)
    counts = timed("aggregate to pair counts", lambda: aggregate(battles), t)
    print(f"  {len(battles):,} battles, {battles.n_models} models, {counts.n_pairs:,} pairs")
    point = timed("BT point fit (fit_bradley_terry)", lambda: fit_bradley_terry(counts), t)
    print(f"  iterations {point.iterations}, gradient norm {point.gradient_norm:.2e}")
    boot = timed(
        f"BT bootstrap, {args.rounds} rounds",
        lambda: bootstrap_bradley_terry(counts, rounds=args.rounds, seed=0, keep_samples=False),
        t,
    )
    print(
        f"  rounds kept {boot.bootstrap_rounds}; widest interval {np.max(boot.ci_high - boot.ci_low):.1f} points"
    )
    timed("online Elo (K=4, tstamp order)", lambda: elo_ratings(battles, k=4.0), t)
    ours_peak = peak_rss_mb()
    print(f"peak memory (this process, before evalica)    {ours_peak:8.0f} MB")
    cli = [
        sys.executable,
        "-m",
        "evalcore",
        "rate",
        str(args.data),
        "--bootstrap",
        str(args.rounds),
        "--out",
        os.devnull,
    ]
    timed(
        f"'rate' command end to end ({args.rounds} rounds)",
        lambda: subprocess.run(cli, cwd=ROOT, check=True),
        t,
    )

    per_round = t[f"BT bootstrap, {args.rounds} rounds"] / args.rounds
    print(f"\nvs FastChat rating_systems.py (issue 3 figures): point fit {FASTCHAT_POINT_S / t['BT point fit (fit_bradley_terry)']:.0f}x"
          f" (ours without CSV read), point incl. read+aggregate "
          f"{FASTCHAT_POINT_S / (t['read CSV (read_battles)'] + t['aggregate to pair counts'] + t['BT point fit (fit_bradley_terry)']):.1f}x,"
          f" per bootstrap round {FASTCHAT_PER_ROUND_S / per_round:.0f}x")  # fmt: skip

    if args.skip_evalica:
        return 0
    import evalica

    names = np.asarray(battles.models, dtype=object)
    winner_map = np.array(
        [evalica.Winner.X, evalica.Winner.Y, evalica.Winner.Draw, evalica.Winner.Draw], dtype=object
    )
    xs, ys, ws = timed(
        "evalica: build inputs (names, Winner list)",
        lambda: (
            names[battles.model_a].tolist(),
            names[battles.model_b].tolist(),
            winner_map[battles.outcome].tolist(),
        ),
        t,
    )
    ev_bt = timed("evalica bradley_terry (pyo3)", lambda: evalica.bradley_terry(xs, ys, ws), t)
    timed("evalica elo (pyo3, K=4)", lambda: evalica.elo(xs, ys, ws, k=4.0), t)
    if args.evalica_bootstrap > 0:
        timed(
            f"evalica bootstrap BT, {args.evalica_bootstrap} resamples",
            lambda: evalica.bootstrap(
                evalica.bradley_terry, xs, ys, ws, n_resamples=args.evalica_bootstrap,
                bootstrap_method="percentile", random_state=0,
            ),
            t,
        )  # fmt: skip
    ours_order = [battles.models[k] for k in point.order()]
    their_order = list(ev_bt.scores.sort_values(ascending=False).index)
    swaps = sum(a != b for a, b in zip(ours_order, their_order))
    print(f"  evalica BT ranking positions differing from ours: {swaps} (evalica stops MM at 100 iterations)")
    print("\nratios (evalica time / ours):")
    print(f"  BT point fit: {t['evalica bradley_terry (pyo3)'] / t['BT point fit (fit_bradley_terry)']:.1f}x; "
          f"incl. aggregation {t['evalica bradley_terry (pyo3)'] / (t['BT point fit (fit_bradley_terry)'] + t['aggregate to pair counts']):.1f}x")  # fmt: skip
    print(f"  Elo: {t['evalica elo (pyo3, K=4)'] / t['online Elo (K=4, tstamp order)']:.2f}x")
    if args.evalica_bootstrap > 0:
        ev_round = t[f"evalica bootstrap BT, {args.evalica_bootstrap} resamples"] / args.evalica_bootstrap
        print(
            f"  bootstrap per round: {ev_round / per_round:.0f}x ({ev_round:.2f} s vs {per_round * 1e3:.2f} ms)"
        )
    print(f"peak memory (whole run incl. evalica)          {peak_rss_mb():8.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
