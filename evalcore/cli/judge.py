"""``python -m evalcore judge``: audit a judge against labelled pairs, or score models with it.

    python -m evalcore judge audit PAIRS --model hf --model-args path=DIR --protocol FILE --out DIR \
        [--verbosity N] [--self-preference N] [--limit N] [--seed S] [--rounds R] [--cache FILE]
    python -m evalcore judge run --model hf --model-args path=DIR --protocol FILE --instructions FILE \
        --baseline NAME=BACKEND:key=value,... --candidate NAME=BACKEND:key=value,... --out DIR

``judge grade`` (single-answer grading, evalcore/cli/grade.py) and ``judge panel`` (judges combined,
evalcore/cli/judge_panel.py) are added to this command by their own modules.

``--model``/``--model-args`` name the judge exactly as ``evalcore run`` names a model (hf, vllm,
openai). A model spec's ``gen.max_new_tokens`` and ``gen.system`` keys set how it answers. Judgments
(and answers) are cached in ``--cache`` (default ``DIR/cache.sqlite``): a re-run costs no model call.
A run with failed judgments still writes its files, then exits with status 1 and names the first one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from evalcore.cli import CliError, check_option
from evalcore.judging.answer_files import model_answer_rows, question_set_sha256
from evalcore.judging.answering import answer_questions
from evalcore.judging.audit import (
    audit_report,
    self_preference_report,
    verbosity_pairs,
    verbosity_report,
)
from evalcore.judging.cache import AnswerCache, JudgmentCache, SqliteStore
from evalcore.judging.fastchat import MAX_NEW_TOKENS as FASTCHAT_MAX_NEW_TOKENS
from evalcore.judging.fastchat import (
    fastchat_pairwise_family,
    load_spec,
    read_fastchat_prompts,
    split_spec,
    verdict_lookalikes,
)
from evalcore.judging.judge import PairwiseProtocols, generate_texts, judge_key, judge_pairs
from evalcore.judging.protocol import JudgeProtocol, load_protocol
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions
from evalcore.judging.records import PairItem, read_pairs
from evalcore.judging.run import (
    GenerationSettings,
    Instruction,
    generate_answers,
    judge_run,
    read_instructions,
)
from evalcore.models import load_backend, parse_model_args

GSM8K_DEFAULT = "benchmarks/gsm8k/test.jsonl"


def register(subparsers) -> None:
    parser = subparsers.add_parser("judge", help="audit a judge model, or score models with one")
    commands = parser.add_subparsers(dest="judge_command", metavar="{audit,run,grade,panel}")
    parser.judge_commands = commands  # evalcore.cli.grade and .judge_panel add theirs
    audit = commands.add_parser("audit", help="judge labelled pairs in both orders and report agreement and bias")
    audit.add_argument("pairs", metavar="PAIRS", help="JSON or JSONL pairs: input, output_1, output_2, label (1|2)")
    _judge_arguments(audit)
    audit.add_argument("--limit", type=int, default=None, help="judge only the first N pairs")
    audit.add_argument("--verbosity", type=int, default=0, metavar="N",
                       help="also judge N GSM8K solutions against copies padded with polite filler")
    audit.add_argument("--gsm8k", default=None, metavar="FILE",
                       help=f"GSM8K test.jsonl (default $PODIUM_DATA_DIR/{GSM8K_DEFAULT})")
    audit.add_argument("--self-preference", type=int, default=0, metavar="N",
                       help="also let the judge answer the first N questions and judge its answer against the labelled better one")
    audit.set_defaults(func=run_audit)
    run = commands.add_parser("run", help="score models against a baseline with a judge (win rate, LC, Bradley-Terry)")
    _judge_arguments(run)
    run.add_argument("--instructions", default=None, metavar="FILE", help="JSON/JSONL with instruction, input or question")
    run.add_argument("--questions", default=None, metavar="FILE|sample",
                     help="instead of --instructions: FastChat question.jsonl (one- and two-turn, with categories), "
                          "or 'sample'; every turn is compared (MT-Bench's pairwise judge)")
    run.add_argument("--references", default=None, metavar="FILE",
                     help="with --questions: FastChat reference_answer/*.jsonl, for the reference-guided prompts")
    run.add_argument("--limit", type=int, default=None, help="use only the first N instructions (or questions)")
    run.add_argument("--baseline", required=True, metavar="NAME=BACKEND:ARGS", help="the baseline model")
    run.add_argument("--candidate", action="append", default=[], metavar="NAME=BACKEND:ARGS",
                     help="a judged model (repeat)")
    run.set_defaults(func=run_scores)
    parser.set_defaults(func=lambda args: _missing_command(parser))


def judge_commands(subparsers):
    """The ``judge`` command's subcommands, to which other modules add theirs (``grade``, ``panel``)."""
    return subparsers.choices["judge"].judge_commands


def _missing_command(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _judge_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="judge backend: hf, vllm or openai")
    parser.add_argument("--model-args", default="", help="comma-separated key=value, e.g. path=DIR,dtype=float32")
    parser.add_argument("--protocol", required=True, help="protocol YAML file or bundled name")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--cache", default=None, metavar="FILE", help="SQLite judgment cache (default DIR/cache.sqlite)")
    parser.add_argument("--seed", type=int, default=0, help="seed for bootstrap intervals and sampling")
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="answer length where the judge answers")
    parser.add_argument("--token-budget", type=int, default=None, help="padded tokens per forward pass (log-prob)")
    add_judge_token_limit(parser)


def _setup(args):
    check_option(args.rounds, "--rounds")
    check_option(args.seed, "--seed", minimum=0)
    check_option(args.max_new_tokens, "--max-new-tokens")
    check_option(args.token_budget, "--token-budget")
    protocol = _protocol_spec(args)  # a bad protocol stops before the judge loads
    judge = load_backend(args.model, **parse_model_args(args.model_args))
    if protocol is None:
        protocol = load_protocol(args.protocol, tokenizer=getattr(judge, "tokenizer", None))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(args.cache or out / "cache.sqlite")
    cache = JudgmentCache(store, judge_key=judge_key(judge), protocol_sha256=protocol.sha256)
    return judge, protocol, out, store, cache


def add_judge_token_limit(parser) -> None:
    parser.add_argument("--judge-max-new-tokens", type=int, default=None, metavar="N",
                        help=f"with FastChat's judge_prompts.jsonl: the judge's token limit (default FastChat's "
                             f"{FASTCHAT_MAX_NEW_TOKENS}; recorded in the protocol)")  # fmt: skip


def fastchat_token_limit(args, fastchat: bool) -> int:
    """``--judge-max-new-tokens`` checked: it sets the limit of FastChat prompts only (a YAML protocol
    names its own ``max_new_tokens``)."""
    if args.judge_max_new_tokens is None:
        return FASTCHAT_MAX_NEW_TOKENS
    check_option(args.judge_max_new_tokens, "--judge-max-new-tokens")
    if args.judge_max_new_tokens > 8192:
        raise CliError(f"--judge-max-new-tokens must be at most 8192, got {args.judge_max_new_tokens}")
    if not fastchat:
        raise CliError("--judge-max-new-tokens sets the token limit of FastChat's prompts (--protocol FILE.jsonl); "
                       "a YAML protocol sets its own verdict max_new_tokens")  # fmt: skip
    return args.judge_max_new_tokens


def _protocol_spec(args) -> JudgeProtocol | PairwiseProtocols | None:
    """A FastChat prompt file's pairwise family (``FILE.jsonl``) or one of its prompts
    (``FILE.jsonl:NAME``); None for a bundled name or YAML file (read once the judge's tokenizer is known)."""
    spec = args.protocol
    found = split_spec(spec)
    limit = fastchat_token_limit(args, found is not None)
    if found is None:
        return None
    if found[1] is not None:
        return load_spec(spec, max_new_tokens=limit)
    return fastchat_pairwise_family(read_fastchat_prompts(found[0], max_new_tokens=limit), label=spec)


def _write_jsonl(path: Path, rows) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _write_json(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _failure_exit(judgments) -> int:
    failed = [j for j in judgments if not j.ok]
    if not failed:
        return 0
    first = failed[0]
    print(f"error: {len(failed)} of {len(judgments)} judgments failed (recorded as failed, not ties); "
          f"first: pair {first.pair_id}, order {first.order}: {first.error}", file=sys.stderr)
    return 1


def run_audit(args: argparse.Namespace) -> int:
    pairs = read_pairs(args.pairs)
    if args.limit is not None:
        if args.limit < 1:
            raise CliError("--limit must be at least 1")
        pairs = pairs[: args.limit]
    if args.self_preference < 0:
        raise CliError("--self-preference must be at least 0")
    verbosity_items = _verbosity_items(args) if args.verbosity else []  # a bad file stops before any model call
    judge, protocol, out, _, cache = _setup(args)
    if not isinstance(protocol, JudgeProtocol):
        raise CliError(f"judge audit takes one pairwise protocol: name one prompt of the FastChat file "
                       f"({args.protocol}:pair-v2)")  # fmt: skip
    judgments = judge_pairs(judge, protocol, pairs, cache=cache, token_budget=args.token_budget)
    _write_jsonl(out / "judgments.jsonl", [j.as_dict() for j in judgments])
    report = {"judge": judge.identity.as_dict(), "protocol": {"name": protocol.name, "sha256": protocol.sha256},
              "pairs_file": str(args.pairs)}
    report.update(audit_report(judgments, {p.pair_id: p.label for p in pairs}, rounds=args.rounds, seed=args.seed))
    everything = list(judgments)
    if args.verbosity:
        extra = judge_pairs(judge, protocol, verbosity_items, cache=cache, token_budget=args.token_budget)
        _write_jsonl(out / "verbosity_judgments.jsonl", [j.as_dict() for j in extra])
        report["verbosity"] = verbosity_report(extra)
        everything += extra
    if args.self_preference:
        extra = _self_preference(judge, protocol, pairs[: args.self_preference], cache, args)
        _write_jsonl(out / "self_preference_judgments.jsonl", [j.as_dict() for j in extra])
        report["self_preference"] = self_preference_report(extra, {j.pair_id: 1 for j in extra})
        everything += extra
    _write_json(out / "report.json", report)
    _print_report(report)
    return _failure_exit(everything)


def _verbosity_items(args):
    if args.verbosity < 0:
        raise CliError("--verbosity must be at least 0")
    if args.gsm8k:
        gsm8k = Path(args.gsm8k)
    elif os.environ.get("PODIUM_DATA_DIR"):
        gsm8k = Path(os.environ["PODIUM_DATA_DIR"]) / GSM8K_DEFAULT
    else:
        raise CliError(f"--verbosity needs GSM8K's test.jsonl: pass --gsm8k FILE or export PODIUM_DATA_DIR=DIR "
                       f"(the file is DIR/{GSM8K_DEFAULT})")
    try:
        return verbosity_pairs(gsm8k, n=args.verbosity, seed=args.seed)
    except ValueError as exc:
        raise CliError(f"--verbosity: {exc}") from None


def _self_preference(judge, protocol, pairs, cache, args):
    """The judge's own answer (side 1) against the labelled better answer (side 2) of each pair."""
    conversations = [[{"role": "user", "content": p.question}] for p in pairs]
    texts = generate_texts(judge, conversations, max_new_tokens=args.max_new_tokens)
    items = []
    for pair, text in zip(pairs, texts):
        if isinstance(text, BaseException):
            raise CliError(f"pair {pair.pair_id}: the judge could not answer the question: {text}")
        better = pair.answer_1 if pair.label == 1 else pair.answer_2
        items.append(PairItem(f"self-{pair.pair_id}", pair.question, text, better))
    return judge_pairs(judge, protocol, items, cache=cache, token_budget=args.token_budget)


def _interval(v: dict) -> str:
    return f"[{v['ci_low']:.4f}, {v['ci_high']:.4f}]"


def _print_report(report: dict) -> None:
    print(f"{'figure':<24} {'value':>8} {'95% interval':>20} {'n':>6}")
    for key in ("accuracy_ab", "accuracy_ba", "accuracy_swap_average", "accuracy_both_agree", "consistency",
                "first_position_rate", "kappa"):
        v = report[key]
        if v["value"] is None:
            print(f"{key:<24} {'-':>8} {'-':>20} {v['n']:>6}")
        else:
            print(f"{key:<24} {v['value']:>8.4f} {_interval(v):>20} {v['n']:>6}")
    for section, key in (("verbosity", "prefers_padded"), ("self_preference", "prefers_own")):
        if section in report and report[section][key]["share"]["value"] is not None:
            v = report[section][key]["share"]
            print(f"{section + ' ' + key:<24} {v['value']:>8.4f} {_interval(v):>20} {v['n']:>6}")


def parse_model_spec(text: str) -> tuple[str, str, dict, GenerationSettings]:
    """``NAME=BACKEND:key=value,...`` -> (name, backend, backend args, generation settings)."""
    name, sep, rest = text.partition("=")
    backend, colon, arg_text = rest.partition(":")
    if not sep or not name.strip() or not backend.strip() or "/" in name:
        raise CliError(f"model spec {text!r} is not NAME=BACKEND:key=value,... (NAME without '/')")
    parts = [part.strip() for part in arg_text.split(",")]
    gen_parts = [part[4:] for part in parts if part.startswith("gen.")]
    try:
        args = parse_model_args(",".join(part for part in parts if not part.startswith("gen.")))
        settings = parse_model_args(",".join(gen_parts))
    except ValueError as exc:
        raise CliError(f"model spec {name.strip()!r}: {exc}") from None
    unknown = set(settings) - {"max_new_tokens", "system"}
    if unknown:
        raise CliError(f"model spec {name.strip()!r}: unknown generation key gen.{sorted(unknown)[0]} (use gen.max_new_tokens, gen.system)")
    max_new_tokens = settings.get("max_new_tokens", 256)
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise CliError(f"model spec {name.strip()!r}: gen.max_new_tokens must be a whole number of at least 1, not {max_new_tokens!r}")
    system = settings.get("system")
    gen = GenerationSettings(max_new_tokens=max_new_tokens, system=None if system is None else str(system))
    return name.strip(), backend.strip(), args, gen


def model_answers(spec, questions, loaded: dict, answer_cache: AnswerCache, counts: dict) -> tuple:
    """(answers per question, source description) of one --answers-from model, cached per question."""
    _, name, backend_name, backend_args, max_new_tokens, system = spec
    key = (backend_name, tuple(sorted(backend_args.items())))
    if key not in loaded:
        loaded[key] = load_backend(backend_name, **backend_args)
    backend = loaded[key]
    settings = {"turns": True, "max_new_tokens": max_new_tokens, "system": system}
    texts = [json.dumps(list(q.turns), ensure_ascii=False) for q in questions]
    found = answer_cache.lookup(backend.identity.key, settings, texts)
    keys = [AnswerCache.key(backend.identity.key, settings, t) for t in texts]
    todo = [i for i, k in enumerate(keys) if k not in found or len(found[k].get("turns") or ()) != len(questions[i].turns)]
    fresh = {}
    if todo:
        written = answer_questions(backend, [questions[i] for i in todo], max_new_tokens=max_new_tokens,
                                   system_prompt=system)  # fmt: skip
        fresh = dict(zip(todo, written))
        answer_cache.save(backend.identity.key, settings, {texts[i]: {"turns": list(t)} for i, t in fresh.items()})
        counts["answer_turns_generated"] += sum(len(t) for t in fresh.values())
    answers = [tuple(fresh[i]) if i in fresh else tuple(found[keys[i]]["turns"]) for i in range(len(questions))]
    source = {"from": "model", "backend": backend_name, "identity": backend.identity.as_dict(),
              "max_new_tokens": max_new_tokens, "system": system}  # fmt: skip
    return answers, source, backend


def run_scores(args: argparse.Namespace) -> int:
    check_option(args.limit, "--limit")
    specs = [parse_model_spec(args.baseline)] + [parse_model_spec(c) for c in args.candidate]
    if len(specs) < 2:
        raise CliError("give at least one --candidate besides the --baseline")
    names = [s[0] for s in specs]
    if len(set(names)) != len(names):
        raise CliError(f"model names must differ: {names}")
    if (args.instructions is None) == (args.questions is None):
        raise CliError("give the prompts to answer: --instructions FILE or --questions FILE|sample (one of them)")
    if args.references is not None and args.questions is None:
        raise CliError("--references completes --questions (FastChat's question.jsonl)")
    if args.questions is not None:
        return _run_questions(args, specs)
    instructions = read_instructions(args.instructions, limit=args.limit)
    judge, protocol, out, store, cache = _setup(args)
    if isinstance(protocol, PairwiseProtocols):  # one-turn instructions: the family's one-turn judge (pair-v2)
        protocol = protocol.single
        cache = JudgmentCache(store, judge_key=judge_key(judge), protocol_sha256=protocol.sha256)
    answer_cache = AnswerCache(store)
    loaded: dict = {(args.model, tuple(sorted(parse_model_args(args.model_args).items()))): judge}
    answers, notes = {}, []
    (out / "answers").mkdir(exist_ok=True)
    for name, backend_name, backend_args, settings in specs:
        key = (backend_name, tuple(sorted(backend_args.items())))
        if key not in loaded:
            loaded[key] = load_backend(backend_name, **backend_args)
        backend = loaded[key]
        rows = generate_answers(backend, instructions, settings=settings, cache=answer_cache)
        _write_jsonl(out / "answers" / f"{name}.jsonl",
                     [{**r, "instruction": ins.text, "model": name} for r, ins in zip(rows, instructions)])
        answers[name] = [r["answer"] for r in rows]
        if backend is judge:
            notes.append(f"the judge also answered as {name!r}: its score may carry self-preference")
    results, judged = judge_run(judge, protocol, instructions, answers, baseline=specs[0][0], cache=cache,
                                rounds=args.rounds, seed=args.seed, token_budget=args.token_budget)
    return _finish_scores(results, judged, notes, judge, out, protocol, answers)


def _run_questions(args, specs) -> int:
    """``judge run --questions``: every model answers every turn, and each turn is compared with the
    baseline's (turn 2 with both conversations shown, reference-guided for the family's categories)."""
    questions = read_questions(SAMPLE_QUESTIONS if args.questions == "sample" else Path(args.questions),
                               references_path=args.references)  # fmt: skip
    questions = questions[: args.limit] if args.limit is not None else questions
    judge, protocol, out, store, cache = _setup(args)
    family = protocol if isinstance(protocol, PairwiseProtocols) else None
    if family is None:
        if protocol.turns != 1 or protocol.uses_reference:
            raise CliError(f"--protocol {args.protocol}: with --questions give a one-turn pairwise protocol without a "
                           "reference, or FastChat's whole judge_prompts.jsonl (its four pairwise prompts)")  # fmt: skip
        family = PairwiseProtocols(single=protocol)
    if family.multi is None and any(len(q.turns) > 1 for q in questions):
        raise CliError(f"the questions have two turns and --protocol {args.protocol} compares one: give FastChat's "
                       "judge_prompts.jsonl, whose pair-v2-multi-turn compares the second turn")  # fmt: skip
    loaded: dict = {(args.model, tuple(sorted(parse_model_args(args.model_args).items()))): judge}
    counts = {"answer_turns_generated": 0}
    turns, notes = {}, []
    (out / "answers").mkdir(exist_ok=True)
    for name, backend_name, backend_args, settings in specs:
        spec = ("model", name, backend_name, backend_args, settings.max_new_tokens, settings.system)
        turns[name], _, backend = model_answers(spec, questions, loaded, AnswerCache(store), counts)
        _write_jsonl(out / "answers" / f"{name}.jsonl", model_answer_rows(name, questions, turns[name]))
        if backend is judge:
            notes.append(f"the judge also answered as {name!r}: its score may carry self-preference")
    items = [(q, t) for q in questions for t in range(1, len(q.turns) + 1)]
    instructions = [Instruction(f"{q.question_id}/t{t}", q.turns[t - 1]) for q, t in items]
    answers = {name: [turns[name][i][t - 1] for i, q in enumerate(questions) for t in range(1, len(q.turns) + 1)]
               for name in turns}  # fmt: skip
    index = {q.question_id: i for i, q in enumerate(questions)}
    baseline = specs[0][0]

    def pair_for(model: str, k: int, pair_id: str):
        question, turn = items[k]
        refs = question.references
        protocol = family.pick(turn, guided=bool(refs) and family.guided(question.category))
        base, mine = turns[baseline][index[question.question_id]], turns[model][index[question.question_id]]
        shown = {} if protocol.turns == 1 else {"questions": question.turns[:turn], "answers_1": tuple(base[:turn]),
                                                "answers_2": tuple(mine[:turn])}  # fmt: skip
        if protocol.uses_reference:
            shown["references"] = refs[:turn] if protocol.turns == 2 else ()
        item = PairItem(pair_id, question.turns[turn - 1], base[turn - 1], mine[turn - 1],
                        reference=refs[turn - 1] if protocol.uses_reference else None, **shown)  # fmt: skip
        return protocol, item

    results, judged = judge_run(judge, family, instructions, answers, baseline=baseline, cache=cache,
                                rounds=args.rounds, seed=args.seed, token_budget=args.token_budget, pair_for=pair_for)
    results["questions"] = {"source": args.questions, "references": args.references, "count": len(questions),
                            "turns": len(items), "sha256": question_set_sha256(questions)}  # fmt: skip
    results["this_run"] = counts
    return _finish_scores(results, judged, notes, judge, out, family, answers)


def _finish_scores(results, judged, notes, judge, out, protocol, answers) -> int:
    members = [protocol] if isinstance(protocol, JudgeProtocol) else list(protocol.members.values())
    for name, texts in answers.items():
        found = verdict_lookalikes(members, texts)
        if found:
            notes.append(f"{found} answer(s) of {name!r} contain a verdict in FastChat's form ([[A]], [[B]], [[C]] or "
                         "ratings); FastChat's rule reads the first verdict the judge writes, so a judge quoting one "
                         "is read as the answer says")  # fmt: skip
    results["notes"] = notes + results["notes"]
    results["judge"] = judge.identity.as_dict()
    _write_jsonl(out / "judgments.jsonl", [{"model": m, **j.as_dict()} for m, j in judged])
    _write_json(out / "results.json", results)
    print(f"{'model':<24} {'win_rate':>9} {'95% interval':>16} {'lc_win_rate':>12} {'95% interval':>16} {'n':>5}")
    for name, v in results["models"].items():
        text = []
        for value, prefix in (("win_rate", "win_rate"), ("lc_win_rate", "lc")):
            low, high = v.get(f"{prefix}_ci_low"), v.get(f"{prefix}_ci_high")
            text += ["-" if v.get(value) is None else f"{v[value]:.2f}",
                     "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"]  # fmt: skip
        print(f"{name:<24} {text[0]:>9} {text[1]:>16} {text[2]:>12} {text[3]:>16} {v['n']:>5}")
    return _failure_exit([j for _, j in judged])
