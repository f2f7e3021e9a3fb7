"""Reward-model downloads as bytes: CSV (formula-safe, floats exactly) and JSON."""

from __future__ import annotations

import io
import json

from evalcore.boundary import csvsafe

FIELDS = ("model", "kind", "category", "subset", "accuracy", "ci_low", "ci_high", "interval", "n", "correct", "wrong", "tie", "skipped",
          "pairs_key", "weights_sha256", "reference_weights_sha256", "beta", "imported_at")  # fmt: skip


def rewards_csv(rows: list[dict]) -> bytes:
    buffer = io.StringIO()
    writer = csvsafe.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for row in rows:
        writer.writerow(
            ["" if row[f] is None else repr(row[f]) if isinstance(row[f], float) else row[f] for f in FIELDS]
        )
    return buffer.getvalue().encode()


def rewards_json(rows: list[dict]) -> bytes:
    return json.dumps({"interval": "95%, the method in each row's interval", "rows": [{f: row[f] for f in FIELDS} for row in rows]},
                      ensure_ascii=False).encode()  # fmt: skip
