"""``python -m evalcore run``: evaluate a model on benchmark tasks, harness style.

    python -m evalcore run --model hf --model-args path=DIR,dtype=float32 --tasks mmlu,gsm8k \
        [--include-path DIR] [--trust-task-code] [--num-fewshot N] [--limit N] [--batch-size auto|N] \
        [--seed S | --seed RANDOM,NUMPY,TORCH,FEWSHOT] [--fewshot-seed N] \
        [--output-dir DIR] [--log-samples] [--cache FILE] [--predict-only] \
        [--apply-chat-template [NAME]] [--system-instruction TEXT] [--fewshot-as-multiturn [BOOL]] [--gen-kwargs K=V,...]

A chat endpoint: ``--model openai-chat --model-args base_url=http://HOST:PORT/v1,concurrency=8``
(the harness's ``local-chat-completions``; the chat template is the endpoint's).

The flags it shares with lm-evaluation-harness 0.4.13's ``lm_eval run`` (dashes for underscores) mean
what they mean there (tests/evalcore/test_lm_eval_flags.py runs lm-eval's own parser beside this one):
``--seed`` is one integer for all four seeds or ``random,numpy,torch,fewshot`` (each an integer or
None; default ``0,1234,1234,1234``; what each drives here: :mod:`evalcore.engine.seeds`);
``--apply-chat-template`` takes an optional template name, for tokenizers with several named templates.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings

from evalcore.cli import CliError, check_option, task_names
from evalcore.engine import TaskIndex, evaluate, write_run
from evalcore.engine.cache import CachedBackend, RequestCache
from evalcore.engine.chat import parse_gen_kwargs
from evalcore.engine.results import read_results, run_to_dict
from evalcore.engine.seeds import DEFAULT_SEED_TEXT, MAX_SEED, Seeds, parse_seed
from evalcore.models import load_backend, parse_model_args
from evalcore.models.chat_templates import NAMED_TEMPLATE_REFUSED


def register(subparsers) -> None:
    parser = subparsers.add_parser("run", help="run benchmark tasks on a model")
    parser.add_argument(
        "--model", required=True, help="backend name: hf, vllm, openai (completions) or openai-chat"
    )
    parser.add_argument(
        "--model-args", default="", help="comma-separated key=value, e.g. path=DIR,dtype=float32"
    )
    parser.add_argument("--tasks", required=True, help="comma-separated task, group or tag names")
    parser.add_argument(
        "--include-path", action="append", default=[], metavar="DIR", help="folder of extra task YAML files"
    )
    parser.add_argument(
        "--trust-task-code",
        action="store_true",
        help="run Python code (!function) beside task files under --include-path, as the harness does; "
        "only for folders you trust (bundled tasks are always trusted)",
    )
    parser.add_argument("--num-fewshot", type=int, default=None, help="override every task's num_fewshot")
    parser.add_argument(
        "--limit", default=None, metavar="N",
        help="evaluate only the first N documents of each task; below 1, that fraction of them (as lm-eval)"
    )
    parser.add_argument("--batch-size", default=None, help="'auto' or a number of rows per forward pass")
    parser.add_argument(
        "--seed",
        default=None,
        metavar="S|RANDOM,NUMPY,TORCH,FEWSHOT",
        help=f"as lm-eval 0.4.13: one integer for all four seeds, or 4 comma-separated values, each an integer "
        f"or None (not set); default {DEFAULT_SEED_TEXT}. Here random also seeds the bootstrap intervals, "
        "torch the sampling of generation requests",
    )
    parser.add_argument(
        "--fewshot-seed",
        default=None,
        metavar="N",
        help="the few-shot sampler's seed (--seed's fourth value; harness default 1234); a Podium flag",
    )
    parser.add_argument("--output-dir", default=None, help="write results.json (and samples) here")
    parser.add_argument(
        "--log-samples", action="store_true", help="write samples_<task>.jsonl, one line per document"
    )
    parser.add_argument(
        "--cache",
        default=None,
        metavar="FILE",
        help="SQLite request cache; an interrupted run resumes from it",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    parser.add_argument(
        "--apply-chat-template",
        nargs="?",
        const=True,
        default=False,
        metavar="NAME",
        help="render each prompt as a conversation with the model's chat template (as the harness does); "
        "NAME picks one of a tokenizer's named templates (e.g. tool_use). Implied for generation tasks on "
        "openai-chat, whose endpoint applies its template",
    )
    parser.add_argument(
        "--system-instruction",
        default=None,
        metavar="TEXT",
        help="a system message before the task's description (plain prompts: the text goes first)",
    )
    parser.add_argument(
        "--fewshot-as-multiturn",
        nargs="?",
        const="true",
        default=None,
        metavar="BOOL",
        help="few-shot examples as alternating user/assistant turns; on by default with the chat template, "
        "as in lm-eval 0.4.13 (--fewshot-as-multiturn false: one user message)",
    )
    parser.add_argument(
        "--gen-kwargs",
        default=None,
        metavar="K=V,...",
        help="override generation settings: temperature, top_p, max_gen_toks (max_tokens), until "
        "(stop), do_sample; key=value pairs or a JSON object (for stop lists and newlines)",
    )
    parser.add_argument("--predict-only", action="store_true",
                        help="generate and store samples without scoring (implies --log-samples); "
                        "score later with python -m evalcore rescore")  # fmt: skip
    parser.set_defaults(func=run)


def limit_value(text: str | None) -> int | float | None:
    """``--limit``: a whole number of documents, or a fraction below 1 (lm-eval 0.4.13's meaning)."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if 1 <= value < float("inf") and value == int(value):
        return int(value)
    if 0 < value < 1:
        return value
    raise CliError(f"--limit must be at least 1, got {str(text)[:40]} (a whole number of documents, or a fraction "
                   "between 0 and 1: 0.1 is the first tenth of each task's documents)")  # fmt: skip


def yes_no(text: str) -> bool:
    """``--fewshot-as-multiturn``'s value: true or false (also 1/0, yes/no), anything else refused."""
    value = str(text).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise CliError(f"--fewshot-as-multiturn expected true or false, got {str(text)[:40]!r}")


OFF_WORDS = ("false", "0", "no", "off", "none")


def chat_template_value(value: bool | str) -> bool | str:
    """``--apply-chat-template [NAME]`` as lm-eval 0.4.13 reads it: left out, False; bare, True; with a
    value, that template name (an empty value, False, as lm-eval drops it).

    lm-eval reads every value as a name, ``false`` too, which then still applies the template; Podium
    refuses false/0/no/off/none rather than run with the template that the word seems to turn off.
    """
    if isinstance(value, bool):
        return value
    if value == "":
        return False
    if value.strip().lower() in OFF_WORDS:
        raise CliError(f"--apply-chat-template takes a template name, not {value[:40]!r}: lm-eval 0.4.13 reads "
                       "any value as a name and applies the template; leave the flag out to run without it")  # fmt: skip
    return value


def seeds_value(seed: str | None, fewshot_seed: str | None) -> Seeds:
    """``--seed`` (lm-eval 0.4.13's syntax and meaning, :func:`evalcore.engine.seeds.parse_seed`) with
    ``--fewshot-seed``, Podium's flag for the fourth value: it sets the few-shot seed of the default, of
    one ``--seed`` integer or of three values; beside four values that say otherwise it is refused."""
    try:
        seeds, count = parse_seed(seed)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if fewshot_seed is None:
        if count == 3:
            warnings.warn(f"--seed {seed} has 3 values: the few-shot seed is the default {seeds.fewshot} "
                          "(as in lm-eval 0.4.13)", stacklevel=2)  # fmt: skip
        return seeds
    try:
        fewshot = int(str(fewshot_seed).strip())
    except ValueError:
        fewshot = -1
    if not 0 <= fewshot <= MAX_SEED:
        raise CliError(f"--fewshot-seed must be a whole number from 0 to {MAX_SEED}, got {str(fewshot_seed)[:40]!r}")
    if count == 4 and seeds.fewshot != fewshot:
        raise CliError(f"--fewshot-seed {fewshot} contradicts --seed {seed}, whose fourth value is the few-shot "
                       "seed: give it in one place")  # fmt: skip
    return dataclasses.replace(seeds, fewshot=fewshot)


def multiturn_in_force(args) -> bool:
    """lm-eval 0.4.13's rule for the same flags: few-shot examples are alternating turns by default when
    the chat template is applied (``--apply-chat-template``, or the endpoint's on ``openai-chat``), and
    ``--fewshot-as-multiturn false`` turns that off; asking for them without a template is refused."""
    template = bool(chat_template_value(args.apply_chat_template) or args.model == "openai-chat")
    if args.fewshot_as_multiturn is None:
        return template
    wanted = yes_no(args.fewshot_as_multiturn)
    if wanted and not template:
        raise CliError("--fewshot-as-multiturn needs --apply-chat-template (or --model openai-chat)")
    return wanted


def run(args) -> int:
    if args.predict_only and not args.output_dir:
        raise CliError("--predict-only needs --output-dir (the samples are what it produces)")
    if args.log_samples and not args.output_dir:
        raise CliError("--log-samples needs --output-dir")
    # Every option is checked before the task files are read and the model loads (minutes on a big one).
    check_option(args.num_fewshot, "--num-fewshot", minimum=0)
    limit = limit_value(args.limit)
    seeds = seeds_value(args.seed, args.fewshot_seed)
    apply_chat_template = chat_template_value(args.apply_chat_template)
    if isinstance(apply_chat_template, str) and args.model == "openai-chat":
        raise CliError(NAMED_TEMPLATE_REFUSED)
    names = task_names(args.tasks)
    try:
        gen_kwargs = parse_gen_kwargs(args.gen_kwargs)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.system_instruction is not None and not args.system_instruction.strip():
        raise CliError("--system-instruction is empty")
    fewshot_as_multiturn = multiturn_in_force(args)
    model_args = parse_model_args(args.model_args)
    if args.batch_size is not None:
        model_args["batch_size"] = batch_size(args.batch_size)
    index = TaskIndex(args.include_path, trust_task_code=args.trust_task_code)
    tasks, groups = index.resolve(names)
    backend = load_backend(args.model, **model_args)
    if args.cache:
        backend = CachedBackend(backend, RequestCache(args.cache))
    result = evaluate(
        backend,
        tasks,
        groups=groups,
        index=index,
        num_fewshot=args.num_fewshot,
        limit=limit,
        seed=seeds,
        progress=not args.no_progress,
        apply_chat_template=apply_chat_template,
        system_instruction=args.system_instruction,
        fewshot_as_multiturn=fewshot_as_multiturn,
        gen_kwargs=gen_kwargs,
        predict_only=args.predict_only,
    )
    if args.output_dir:
        path = write_run(result, args.output_dir, log_samples=args.log_samples or args.predict_only)
        print(f"results written to {path}", file=sys.stderr)
    if args.predict_only:
        print(f"predict-only: samples written, not scored; score them with python -m evalcore rescore "
              f"{args.output_dir}/samples_<task>.jsonl --task <task>", file=sys.stderr)  # fmt: skip
        return 0
    print_table(read_results(run_to_dict(result)))
    return 0


def batch_size(text: str) -> str:
    """``--batch-size``: 'auto' or a whole number of at least 1 (as text, as the backends take it)."""
    value = text.strip().lower()
    if value == "auto":
        return value
    if not value.isdigit() or int(value) < 1:
        raise CliError(f"--batch-size must be 'auto' or a whole number of at least 1, got {text!r}")
    return str(int(value))


def print_table(results: dict) -> None:
    """One line per metric: value, stderr ("-" where the interval is lopsided), 95% interval, n, method."""
    print(f"{'task':<40} {'metric':<32} {'value':>8} {'stderr':>8} {'95% interval':>20} {'n':>6}  interval")
    for task, metrics in results.items():
        for name, v in metrics.items():
            interval = f"[{v['ci_low']:.4f}, {v['ci_high']:.4f}]" if v["ci_low"] is not None else "-"
            stderr = f"{v['stderr']:.4f}" if v["stderr"] is not None else "-"
            method = v.get("interval") or "-"
            print(f"{task:<40} {name:<32} {v['value']:>8.4f} {stderr:>8} {interval:>20} {v['n']:>6}  {method}")
