"""Record lm-evaluation-harness's outputs on the harness-parity cases (run with the harness's Python).

    var/lmeval-venv/bin/python bench/record_harness_reference.py [--model-dir DIR] [--case NAME ...]

For each case of ``tests/evalcore/engine/harness_cases.py`` (the harness's own task files with
the data location overridden to a few local documents) this runs ``lm_eval.simple_evaluate`` on
SmolLM2-135M-Instruct in float32 on the CPU, batch size 1, and writes
``tests/evalcore/engine/data/harness_reference/<case>.json``: the harness version, every request's
arguments (prompt and continuation, or prompt), the raw responses (log-likelihoods or generated
text), the filtered responses and per-document metric values, and the aggregated metrics.
humaneval and mbpp (``unsafe_code``) run their programs with the hub's ``code_eval`` script, loaded
from a local copy (:func:`offline_code_eval`), in this process's children, as the harness does:
run this only on the model's own generations for the cases' small problems.
``tests/evalcore/engine/test_harness_tasks.py`` compares the engine against these files offline.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "evalcore" / "engine"))

from harness_cases import CASES, HUB_CODE_EVAL, REFERENCE, build_case, use_punkt_tab  # noqa: E402


def offline_code_eval() -> None:
    """Have the harness's ``evaluate.load("code_eval")`` load the hub's own script from a local copy.

    humaneval's and mbpp's ``utils.py`` load the metric from the hub at import, which is offline
    here; the copy (``data/harness_tasks/hub_code_eval``, unchanged from huggingface/evaluate) is
    what the hub serves, so the harness runs its programs exactly as online. Any other name still
    goes to the hub. Code execution is allowed for this process only (``HF_ALLOW_CODE_EVAL``).
    """
    import os

    import evaluate

    os.environ["HF_ALLOW_CODE_EVAL"] = "1"
    load = evaluate.load

    def local_code_eval(path, *args, **kwargs):
        return load(str(HUB_CODE_EVAL) if path == "code_eval" else path, *args, **kwargs)

    evaluate.load = local_code_eval


def _plain(value):
    """JSON-safe copy of a harness value (tuples -> lists, numpy scalars -> floats)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def record_case(case: str, lm, threads: int) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        task = build_case(case, Path(tmp))
        if case == "ifeval":
            use_punkt_tab(Path(tmp) / "nltk_data")
        manager = TaskManager(include_path=tmp)
        result = simple_evaluate(
            model=lm, tasks=[task], log_samples=True, task_manager=manager, bootstrap_iters=0, random_seed=0,
            numpy_random_seed=1234, torch_random_seed=1234, fewshot_random_seed=1234, confirm_run_unsafe_code=True,
        )  # fmt: skip
    samples: dict[str, dict] = {}
    for row in result["samples"][task]:
        entry = samples.setdefault(str(row["doc_id"]), {
            "doc_id": row["doc_id"], "target": _plain(row["target"]),
            "arguments": _plain(row["arguments"]),
            "resps": _plain(row["resps"]), "filtered": {}, "metrics": {},
        })  # fmt: skip
        entry["filtered"][row["filter"]] = _plain(row["filtered_resps"])
        for metric in row["metrics"]:
            entry["metrics"][f"{metric},{row['filter']}"] = _plain(row[metric])
    metrics = {k: _plain(v) for k, v in result["results"][task].items() if "," in k and "_stderr" not in k}
    return {
        "case": case, "task": task, "lm_eval": importlib.metadata.version("lm_eval"),
        "model": "SmolLM2-135M-Instruct float32 cpu batch_size=1", "threads": threads,
        "samples": [samples[k] for k in sorted(samples, key=int)], "metrics": metrics,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", default="/work/models/SmolLM2-135M-Instruct")
    parser.add_argument("--case", action="append", default=None, choices=sorted(CASES))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch
    from lm_eval.models.huggingface import HFLM

    torch.set_num_threads(args.threads)
    offline_code_eval()
    lm = HFLM(pretrained=args.model_dir, dtype="float32", device="cpu", batch_size=1)
    REFERENCE.mkdir(parents=True, exist_ok=True)
    for case in args.case or sorted(CASES):
        recorded = record_case(case, lm, args.threads)
        (REFERENCE / f"{case}.json").write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
        print(f"{case}: {len(recorded['samples'])} documents, metrics {recorded['metrics']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
