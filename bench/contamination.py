"""Benchmark the n-gram contamination scan on a corpus of >= 1 GB, against the textbook's scan.

    OMP_NUM_THREADS=1 PODIUM_DATA_DIR=/work/shared/data .venv/bin/python bench/contamination.py [--gb 1.0]

The corpus (built once under ``bench/out/contamination-corpus/``, reused while its manifest matches)
is GSM8K train questions and answers and MMLU test questions with their options, shuffled and
repeated, in ``.txt``, ``.jsonl``, ``.txt.gz`` and ``.jsonl.gz`` files, with planted copies of GSM8K
test and BIG-Bench Hard items: verbatim, and lightly reworded (one word in ten replaced). The scan
looks for the 1,319 GSM8K test items and the 6,511 BBH items (``--tasks gsm8k,bbh``), 13-grams.

Each scan runs in its own process (same files, same run) so its peak resident memory is its own:
evalcore's scanner on the first file only and on the whole corpus (memory must not grow with the
corpus), then the textbook's plain-Python scan (a set of 13-gram tuples, the corpus word by word).
The flagged items (task, doc_id, matched n-grams) must be identical.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalcore.contamination.items import benchmark_items  # noqa: E402
from evalcore.contamination.scan import scan_items  # noqa: E402
from evalcore.contamination.textbook import textbook_scan  # noqa: E402

OUT = ROOT / "bench" / "out" / "contamination-corpus"
TASKS = ["gsm8k", "bbh"]
# name, share of the corpus; the first file is the "small corpus" of the memory comparison
FILES = [("part-0.txt", 0.12), ("part-1.txt", 0.16), ("part-2.txt", 0.16), ("part-3.jsonl", 0.16),
         ("part-4.jsonl", 0.16), ("part-5.txt", 0.08), ("part-6.txt.gz", 0.08), ("part-7.jsonl.gz", 0.08)]  # fmt: skip
PLANTED_PER_FILE = 60


def data_dir() -> Path:
    return Path(os.environ.get("PODIUM_DATA_DIR", ROOT.parent / "shared" / "data"))


def filler_documents() -> list[str]:
    """GSM8K train (question and worked answer) and MMLU test (question and options) as documents."""
    import csv

    docs = []
    with open(data_dir() / "benchmarks" / "gsm8k" / "train.jsonl", encoding="utf-8") as handle:
        docs += [f"{r['question']}\n{r['answer']}" for r in map(json.loads, handle)]
    for path in sorted((data_dir() / "benchmarks" / "mmlu" / "test").glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                docs.append("\n".join([row["question"], *(row[f"choice{i}"] for i in range(4))]))
    return docs


def reword(text: str, rng: random.Random) -> str:
    """Replace one word in ten with another word (a light edit that leaves most 13-grams broken or intact)."""
    words = text.split(" ")
    for i in range(0, len(words), 10):
        words[i + rng.randrange(min(10, len(words) - i))] = rng.choice(["some", "the", "many", "this"])
    return " ".join(words)


def planted(rng: random.Random, sources: list[str]) -> list[str]:
    picks = [rng.choice(sources) for _ in range(PLANTED_PER_FILE)]
    return [text if k % 3 else reword(text, rng) for k, text in enumerate(picks)]


def write_file(path: Path, target: int, filler: list[str], sources: list[str], rng: random.Random) -> int:
    opener = gzip.open if path.name.endswith(".gz") else open
    jsonl = ".jsonl" in path.name
    written, plants = 0, planted(rng, sources)
    with opener(path, "wt", encoding="utf-8", **({"compresslevel": 1} if path.name.endswith(".gz") else {})) as handle:
        while written < target:
            rng.shuffle(filler)
            docs = filler[:2000]
            if plants:
                docs = [*docs[:1000], plants.pop(), *docs[1000:]]
            text = "".join(json.dumps({"text": d}) + "\n" for d in docs) if jsonl else "\n\n".join(docs) + "\n\n"
            handle.write(text)
            written += len(text.encode("utf-8"))
    return written


def build_corpus(gigabytes: float, *, seed: int) -> list[Path]:
    manifest = OUT / "manifest.json"
    wanted = {"gigabytes": gigabytes, "seed": seed, "files": FILES, "planted": PLANTED_PER_FILE}
    paths = [OUT / name for name, _ in FILES]
    if manifest.exists() and json.loads(manifest.read_text()) == json.loads(json.dumps(wanted)):
        return paths
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    filler = filler_documents()
    sources = [i.text for i in benchmark_items(TASKS)]
    started = time.perf_counter()
    for path, (_name, share) in zip(paths, FILES):
        write_file(path, int(gigabytes * 1e9 * share), filler, sources, rng)
    manifest.write_text(json.dumps(wanted))
    print(f"corpus built in {time.perf_counter() - started:.0f} s under {OUT}", file=sys.stderr)
    return paths


def worker(kind: str, paths: list[str]) -> dict:
    """One scan in this process: time it, report flagged items and peak RSS (MB)."""
    items = benchmark_items(TASKS)
    started = time.perf_counter()
    if kind == "textbook":
        matched = textbook_scan(items, paths, n=13)
        flagged = sorted([items[i].task, items[i].doc_id, count] for i, count in matched.items())
        extra = {}
    else:
        result = scan_items(items, paths, n=13)
        flagged = sorted([m.task, m.doc_id, m.matched_ngrams] for m in result.flagged)
        extra = {"benchmark_ngrams": result.benchmark_ngrams, "corpus": result.corpus}
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"kind": kind, "seconds": seconds, "peak_rss_mb": peak, "flagged": flagged, **extra}


def run_worker(kind: str, paths: list[Path]) -> dict:
    command = [sys.executable, __file__, "--worker", kind, *map(str, paths)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="corpus size in GB (default 1.0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.paths)))
        return
    paths = build_corpus(args.gb, seed=args.seed)
    size = sum(p.stat().st_size for p in paths)
    print(f"corpus: {len(paths)} files, {size / 1e9:.2f} GB on disk; load average {os.getloadavg()}")
    small = run_worker("evalcore", paths[:1])
    ours = run_worker("evalcore", paths)
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    book = run_worker("textbook", paths)
    assert ours["flagged"] == book["flagged"], "evalcore and the textbook scan flag different items"
    read = ours["corpus"]["bytes"]
    print(f"corpus read: {read / 1e9:.2f} GB decompressed, {ours['corpus']['lines']:,} lines, "
          f"{ours['corpus']['lines_skipped']} skipped; benchmark 13-grams: {ours['benchmark_ngrams']:,}")  # fmt: skip
    print(f"flagged items (identical in both scans): {len(ours['flagged'])}")
    print(f"{'scan':<28} {'seconds':>9} {'MB/s':>8} {'peak RSS MB':>12}")
    for name, row, volume in (("evalcore, first file only", small, small["corpus"]["bytes"]),
                              ("evalcore, whole corpus", ours, read), ("textbook, whole corpus", book, read)):  # fmt: skip
        print(f"{name:<28} {row['seconds']:>9.1f} {volume / 1e6 / row['seconds']:>8.1f} {row['peak_rss_mb']:>12.0f}")
    print(f"speed-up over the textbook scan: {book['seconds'] / ours['seconds']:.1f}x (target >= 5x)")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
