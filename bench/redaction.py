"""Redaction measured on the planted set (evalcore/privacy/planted.py): recall per kind and precision with
Wilson 95% intervals, what was missed, and the time per text.

Usage::

    python bench/redaction.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from evalcore.privacy.planted import measure, planted_items
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
    print(f"{'kind':12s} {'n':>4s}  recall  [95% interval]")
    for kind, row in result["recall"].items():
        print(f"{kind:12s} {row['n']:4d}  {row['value']:.3f}  [{row['ci_low']:.3f}, {row['ci_high']:.3f}]")
    for name in ("recall_structured", "recall_secrets", "precision"):
        row = result[name]
        print(f"{name:18s} {row['value']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (n={row['n']})")
    print(f"missed: {result['missed'] or 'none'}")
    ms = sorted(s * 1000 for s in seconds)
    print(f"per text: mean {statistics.fmean(ms):.2f} ms, median {statistics.median(ms):.2f} ms, max {ms[-1]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
