"""``python -m evalcore categorize``: tag a file of prompts with category protocols, as the site does.

    python -m evalcore categorize PROMPTS --protocol coding --protocol FILE.yaml \
        --model hf --model-args path=DIR,dtype=float32 --out DIR [--limit N] [--cache FILE]

``PROMPTS`` is JSON lines, ``{"prompt": "...", "id": "..."}`` each (docs/categories.md). Writes
``DIR/tags.jsonl``, one JSON line per prompt: its id, and per category the value, the score (criteria
answered yes), each criterion's answer (and P(yes) for log-prob protocols), the tagger and the protocol
version; or the error that failed it. ``DIR/summary.json`` counts each category's prompts. Tags are
cached in ``--cache`` (default ``DIR/cache.sqlite``) by tagger, protocol hash and prompt hash: a re-run
costs no model call. Every input is checked before the model loads; a run with failed tags still writes
its files, then exits with status 1 naming the first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from evalcore.categories import TagCache, load_category_protocol, tag_prompts, tagger_key
from evalcore.categories.prompts import read_prompts
from evalcore.cli import CliError, check_option
from evalcore.judging.cache import SqliteStore
from evalcore.models import load_backend, parse_model_args


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "categorize", help="tag prompts with category protocols (hard prompt, coding, ...)"
    )
    parser.add_argument("prompts", metavar="PROMPTS", help='JSON lines: {"prompt": "...", "id": "..."} each')
    parser.add_argument(
        "--protocol",
        action="append",
        required=True,
        metavar="FILE",
        help="category protocol YAML or bundled name (repeat for several categories)",
    )
    parser.add_argument("--model", required=True, help="tagger backend: hf, vllm or openai")
    parser.add_argument(
        "--model-args", default="", help="comma-separated key=value, e.g. path=DIR,dtype=float32"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument(
        "--cache", default=None, metavar="FILE", help="SQLite tag cache (default DIR/cache.sqlite)"
    )
    parser.add_argument("--limit", type=int, default=None, help="tag only the first N prompts")
    parser.add_argument(
        "--token-budget", type=int, default=None, help="padded tokens per forward pass (log-prob, hf)"
    )
    parser.set_defaults(func=run_categorize)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_categorize(args: argparse.Namespace) -> int:
    check_option(args.limit, "--limit")
    check_option(args.token_budget, "--token-budget")
    try:  # everything the user gave is checked before the model loads
        protocols = [load_category_protocol(p) for p in args.protocol]
        records = read_prompts(args.prompts, limit=args.limit)
        model_args = parse_model_args(args.model_args)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    categories = [p.category for p in protocols]
    if len(set(categories)) != len(categories):
        raise CliError("two --protocol files tag the same category; give one per category")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(args.cache or out / "cache.sqlite")
    tagger = load_backend(args.model, **model_args)
    key = tagger_key(tagger)
    prompts = [r.prompt for r in records]
    rows = [{"id": r.id, **({"extra": r.extra} if r.extra else {}), "tags": {}} for r in records]
    summary: dict = {"tagger": tagger.identity.as_dict(), "prompts": len(records), "categories": {}}
    failed = []
    for protocol in protocols:
        cache = TagCache(store, tagger=key, protocol_sha256=protocol.sha256)
        tags = tag_prompts(tagger, protocol, prompts, cache=cache, token_budget=args.token_budget)
        counts = {"in": 0, "out": 0, "failed": 0, "cached": 0}
        for row, tag in zip(rows, tags):
            entry = {
                k: v
                for k, v in tag.as_dict().items()
                if k not in ("category", "cached") and v not in ("", {}, None)
            }
            row["tags"][protocol.category] = entry
            counts["cached"] += tag.cached
            if not tag.ok:
                counts["failed"] += 1
                failed.append((row["id"], protocol.category, tag.error))
            else:
                counts["in" if tag.value else "out"] += 1
        summary["categories"][protocol.category] = {
            "protocol": protocol.name, "protocol_version": protocol.version, "protocol_sha256": protocol.sha256,
            "threshold": protocol.threshold, **counts,
        }  # fmt: skip
    _write(
        out / "tags.jsonl", "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    )
    _write(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    store.close()
    for category, c in summary["categories"].items():
        print(
            f"{category}: {c['in']} in, {c['out']} out, {c['failed']} failed ({c['cached']} from the cache)"
        )
    if failed:
        pid, category, error = failed[0]
        print(f"error: {len(failed)} tags failed (recorded, not guessed); first: prompt {pid}, {category}: {error}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0
