"""Redaction measured on the planted set (evalcore/privacy/planted.py): recall per kind and per group
(structured, secrets, identity), the share of look-alikes left alone, and precision, each with a Wilson
95% interval; what was missed, what was redacted that should not have been, and the time per text.

Usage::

    python bench/redaction.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from evalcore.privacy.planted import group_of, measure, planted_items
from evalcore.privacy.redact import REDACTOR_VERSION, redact, redact_spans


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    redact("warm up: load the recognisers")
    load_s = time.perf_counter() - started
    items = planted_items()
    result = measure(redact_spans, items)
    seconds = []
    for item in items:
        started = time.perf_counter()
        redact(item.text)
        seconds.append(time.perf_counter() - started)
    if args.json:
        print(json.dumps({**result, "version": REDACTOR_VERSION}, indent=1))
        return 0
    print(f"redactor {REDACTOR_VERSION}; recognisers loaded in {load_s:.1f} s")
    print(f"{result['items']} items: {result['planted']} planted values, {result['lookalikes']} look-alikes")
    print(f"{result['kinds']} kinds; {'kind':24s} {'n':>4s}  recall  [95% interval]")
    for kind, row in result["recall"].items():
        print(f"    {group_of(kind):10s} {kind:24s} {row['n']:4d}  {row['value']:.3f}  [{row['ci_low']:.3f}, {row['ci_high']:.3f}]")
    for group, row in result["recall_group"].items():
        print(f"group {group:12s} {row['value']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (n={row['n']})")
    for name in ("lookalikes_left_alone", "precision"):
        row = result[name]
        print(f"{name:18s} {row['value']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (n={row['n']})")
    print(f"missed: {result['missed'] or 'none'}")
    print(f"look-alikes redacted: {result['false_alarms'] or 'none'}")
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"per text: mean {statistics.fmean(ms):.2f} ms, median {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms, "
          f"max {ms[-1]:.2f} ms ({len(ms)} texts, each redacted once after the warm-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
