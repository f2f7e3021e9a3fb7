"""Writing a run: the results JSON (numbers + protocol) and per-task samples (JSON Lines).

Files are written to a temporary name and renamed into place only when complete, and the
results JSON is written last, so a crash never leaves a partial file that looks complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import evalcore
from evalcore.engine.runner import RunResult

SAMPLE_FIELDS = (
    "doc_id", "doc", "prompt", "target", "fewshot_ids", "choices", "choice_logprobs", "choice_is_greedy",
    "unconditional_logprobs", "logprob", "is_greedy", "num_tokens", "words", "bytes", "responses",
    "finish_reasons", "filtered", "metrics",
)  # fmt: skip


def code_version() -> dict:
    """evalcore's version and, when run from a git checkout, the commit and whether it is modified."""
    info = {"evalcore": evalcore.__version__}
    root = Path(evalcore.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if commit.returncode == 0:
            info["git_commit"] = commit.stdout.strip()
            status = subprocess.run(["git", "status", "--porcelain", "evalcore"], cwd=root, capture_output=True, text=True, timeout=5)
            info["git_dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def atomic_write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def sample_line(record: dict) -> str:
    return json.dumps({k: record[k] for k in SAMPLE_FIELDS if k in record}, ensure_ascii=False, default=str)


def run_to_dict(run: RunResult) -> dict:
    return {
        "results": {task: {k: v.as_dict() for k, v in metrics.items()} for task, metrics in run.results.items()},
        "groups": sorted(run.groups),
        "protocol": {name: task.protocol for name, task in run.tasks.items()},
        "model": run.model,
        "settings": run.settings,
        "code_version": code_version(),
        "wall_time_s": run.wall_time_s,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": True,
    }


def write_run(run: RunResult, output_dir: str | Path, *, log_samples: bool = False) -> Path:
    """Write ``samples_<task>.jsonl`` (if asked) and then ``results.json``; return the latter."""
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    if log_samples:
        for name, task in run.tasks.items():
            atomic_write(output / f"samples_{name}.jsonl", "".join(sample_line(r) + "\n" for r in task.records))
    path = output / "results.json"
    atomic_write(path, json.dumps(run_to_dict(run), indent=2, ensure_ascii=False, default=str))
    return path


def read_samples(path: str | Path) -> list[dict]:
    """Records from a samples JSONL file, with errors that name the line."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path} line {number} is not JSON: {exc}") from None
    if not records:
        raise ValueError(f"{path} holds no samples")
    return records
