"""Writing a run: the results JSON (numbers + protocol) and per-task samples (JSON Lines).

Files are written to a temporary name and renamed into place only when complete, and the
results JSON is written last, so a crash never leaves a partial file that looks complete.

``results.json`` uses lm-evaluation-harness's layout, so its tooling reads Podium's runs:
``results[task]["acc,none"]`` is the value and ``results[task]["acc_stderr,none"]`` its standard
error (``"N/A"`` when there is none); ``versions``, ``n-shot``, ``higher_is_better`` and
``n-samples`` are there too. Podium's intervals and counts are under ``intervals[task]["acc,none"]``
(``value``, ``stderr``, ``ci_low``, ``ci_high``, ``n``, ...). In memory (``RunResult.results``) and
in the database an unfiltered metric keeps its short name (``acc``). :func:`read_results` reads
both this layout and the older one (``results[task]["acc"] = {value, stderr, ...}``).
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
    "doc_id", "doc", "prompt", "messages", "target", "fewshot_ids", "choices", "choice_logprobs", "choice_is_greedy",
    "unconditional_logprobs", "logprob", "is_greedy", "num_tokens", "words", "bytes", "responses",
    "finish_reasons", "filtered", "metrics", "contexts", "continuation", "tampering",
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
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)  # nothing half-written is left beside the target
        raise


def sample_line(record: dict) -> str:
    return json.dumps({k: record[k] for k in SAMPLE_FIELDS if k in record}, ensure_ascii=False, default=str)


def harness_key(key: str) -> str:
    """``acc`` -> ``acc,none``; a key that names its filter (``exact_match,strict-match``) is kept."""
    return key if "," in key else f"{key},none"


def podium_key(key: str) -> str:
    """``acc,none`` -> ``acc`` (the name Podium stores); other keys are kept."""
    return key[: -len(",none")] if key.endswith(",none") else key


def stderr_key(key: str) -> str:
    metric, _, filter_name = harness_key(key).partition(",")
    return f"{metric}_stderr,{filter_name}"


def harness_block(name: str, metrics: dict) -> dict:
    """One task's harness-style entry: ``alias``, ``metric,filter`` and ``metric_stderr,filter``."""
    block: dict = {"alias": name}
    for key, value in metrics.items():
        block[harness_key(key)] = value.value
        block[stderr_key(key)] = "N/A" if value.stderr is None else value.stderr
    return block


def results_payload(results: dict) -> dict:
    """``results`` (harness layout) and ``intervals`` (Podium's numbers) for {task: {key: MetricValue}}."""
    return {
        "results": {name: harness_block(name, metrics) for name, metrics in results.items()},
        "intervals": {name: {harness_key(k): v.as_dict() for k, v in metrics.items()} for name, metrics in results.items()},
    }


def read_results(data: dict) -> dict[str, dict[str, dict]]:
    """{task: {metric key as Podium names it: {value, stderr, ci_low, ci_high, n, ...}}} from a results JSON.

    Accepts this module's layout (``intervals`` beside harness-style ``results``), the older Podium
    layout (``results[task][key]`` a mapping) and a results.json written by the harness itself
    (values and ``_stderr`` keys only; no intervals or counts).
    """
    out: dict[str, dict[str, dict]] = {}
    intervals = data.get("intervals") or {}
    for task, block in (data.get("results") or {}).items():
        if task in intervals:
            out[task] = {podium_key(k): dict(v) for k, v in intervals[task].items()}
            continue
        metrics = {}
        for key, value in block.items():
            if isinstance(value, dict):
                metrics[podium_key(key)] = dict(value)
            elif key != "alias" and "_stderr," not in key and isinstance(value, int | float):
                stderr = block.get(stderr_key(key))
                metrics[podium_key(key)] = {"value": value, "stderr": stderr if isinstance(stderr, int | float) else None}
        out[task] = metrics
    return out


def run_to_dict(run: RunResult) -> dict:
    tasks = run.tasks
    return {
        **results_payload(run.results),
        "groups": {name: harness_block(name, metrics) for name, metrics in run.groups.items()},
        "versions": {name: task.protocol.get("version") for name, task in tasks.items()},
        "n-shot": {name: task.protocol.get("num_fewshot") for name, task in tasks.items()},
        "higher_is_better": {
            name: {podium_key(harness_key(k).split(",")[0]): v.higher_is_better for k, v in metrics.items()}
            for name, metrics in run.results.items()
        },
        "n-samples": {name: {"original": t.protocol.get("n_docs"), "effective": t.protocol.get("n_docs")} for name, t in tasks.items()},
        "protocol": {name: task.protocol for name, task in tasks.items()},
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
