"""How many draft tokens prompt-lookup speculation should propose (``SPECULATE_TOKENS``), measured.

    python bench/speculation_replay.py [--model-dir DIR] [--threads 1] [--bbh N]

1. The cost of one forward pass of the ``hf`` backend by the number of tokens fed (1-9), after a
   200-token prompt, with the KV cache (median of 30 passes each, CPU time of this process).
2. Podium generates bbh zero-shot date_understanding (the harness's own files, ``--bbh`` questions)
   greedily; every row that decoded more than one token (its text re-tokenized) is replayed alone with drafts of 0-8 tokens: passes needed and
   their cost from (1). The text does not depend on the draft length (drafts are kept only where
   they equal the model's greedy choice), so the cheapest length is the fastest, nothing else.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "evalcore" / "engine"))

from harness_cases import build_case  # noqa: E402

from evalcore.engine import TaskIndex, evaluate  # noqa: E402
from evalcore.models import load_backend  # noqa: E402
from evalcore.models.generation import lookup_draft  # noqa: E402
from evalcore.models.scoring import run_base  # noqa: E402


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pass_costs(backend, widths=range(1, 10), passes: int = 30) -> dict[int, float]:
    import torch

    base = getattr(backend.model, backend.model.base_model_prefix)
    costs = {}
    with torch.inference_mode():
        for width in widths:
            _, cache = run_base(base, input_ids=torch.randint(100, 1000, (1, 200)), use_cache=True)
            seen, times = 200, []
            for _ in range(passes):
                started = cpu_s()
                _, cache = run_base(base, input_ids=torch.randint(100, 1000, (1, width)), cache=cache, use_cache=True,
                                    attention_mask=torch.ones((1, seen + width), dtype=torch.long),
                                    position_ids=(torch.arange(width) + seen).view(1, -1))  # fmt: skip
                times.append(cpu_s() - started)
                seen += width
            costs[width] = sorted(times)[passes // 2]
    return costs


def replay(context: list[int], generated: list[int], draft: int, costs: dict[int, float]) -> tuple[int, float]:
    """(passes, seconds) to decode ``generated`` after ``context`` with drafts of ``draft`` tokens."""
    position, passes, seconds = 1, 0, 0.0
    while position < len(generated):
        proposal = lookup_draft(context + generated[:position], max_tokens=draft) if draft else []
        accepted = 0
        while accepted < len(proposal) and position + accepted < len(generated):
            if proposal[accepted] != generated[position + accepted]:
                break
            accepted += 1
        passes += 1
        seconds += costs[1 + len(proposal)]
        position += 1 + accepted
    return passes, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", default="/work/models/SmolLM2-135M-Instruct")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bbh", type=int, default=20)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    backend = load_backend("hf", path=args.model_dir, dtype="float32", device="cpu")
    costs = pass_costs(backend)
    print("pass cost by tokens fed (ms):", {w: round(1000 * c, 1) for w, c in costs.items()})
    with tempfile.TemporaryDirectory() as tmp:
        task = build_case("bbh_date_understanding", Path(tmp) / "bbh", n=args.bbh)
        configs, _ = TaskIndex([tmp], bundled=False, trust_task_code=True).resolve([task])
        run = evaluate(backend, configs, limit=args.bbh)
    rows = [(backend.tok_encode(r["prompt"]), backend.tok_encode(r["responses"][0]))
            for r in next(iter(run.tasks.values())).records if len(backend.tok_encode(r["responses"][0])) > 1]  # fmt: skip
    print(f"{len(rows)} rows decode more than one token; replayed alone:")
    for draft in (0, 2, 3, 4, 6, 8):
        totals = [replay(context, generated, draft, costs) for context, generated in rows]
        print(f"  drafts of {draft}: {sum(p for p, _ in totals)} passes, {sum(s for _, s in totals):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
