"""``python -m evalcore judge grade``: single-answer grading (MT-Bench's 1-10) of one- and two-turn questions.

    python -m evalcore judge grade --questions FILE|sample [--references FILE] [--limit N] \
        --answers-from NAME=BACKEND:key=value,... [--answers NAME=FILE] --judge hf --judge-args path=DIR \
        [--protocol mt-bench|mt-bench-logprob|NAME|FILE|PROMPTS.jsonl[:NAME]] [--protocol-multi NAME|FILE] \
        [--reference-mode given|judge|none] \
        [--max-new-tokens N] [--rounds R] [--seed S] [--cache FILE] --out DIR

Each ``--answers-from`` model answers every turn (greedy, turn 2 with its own turn-1 answer in context);
``--answers`` reads pre-generated answers (FastChat's model_answer format). The judge grades every turn
(turn 2 in context; maths, reasoning and coding against references with the mt-bench family).
Answers, references and grades are cached in ``--cache`` (default ``DIR/cache.sqlite``): a re-run
makes no model call. Files: ``answers/<model>.jsonl``, ``grades.jsonl``, ``report.json``.

``--protocol judge_prompts.jsonl`` grades with FastChat's own MT-Bench judge prompts as the file holds
them (single-v1, single-v1-multi-turn, and the -math- ones against references for maths, reasoning,
coding and arena-hard-200 questions) and reads every verdict as FastChat does
(:mod:`evalcore.judging.fastchat`); ``judge_prompts.jsonl:NAME`` picks one prompt (a reference-guided
one grades every question against its reference). ``report.json`` names each prompt with its content
hash and says whether it is FastChat's published wording.

A protocol whose verdict is ``method: logprob`` with a ``scale`` (the ``mt-bench-logprob`` family, or a
YAML file) grades by the ratings' probabilities: each grade is the expected rating, with its
``probabilities``, ``mass`` and ``entropy`` in ``grades.jsonl`` (``grade_method: logprob``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from evalcore.cli import CliError, check_option
from evalcore.cli.judge import (
    add_judge_token_limit,
    fastchat_token_limit,
    judge_commands,
    model_answers,
    parse_model_spec,
)
from evalcore.judging.answer_files import (
    answers_sha256,
    model_answer_rows,
    question_set_sha256,
    read_model_answers,
)
from evalcore.judging.cache import AnswerCache, JudgmentCache, SqliteStore
from evalcore.judging.cost import MeteredBackend, cost_per_1000
from evalcore.judging.fastchat import (
    fastchat_grading_family,
    load_spec,
    read_fastchat_prompts,
    split_spec,
    verdict_lookalikes,
)
from evalcore.judging.grading import (
    FAMILIES,
    GradingProtocols,
    family_of_one,
    grade_bounds,
    grade_conversations,
    judge_references,
    load_grading_protocols,
)
from evalcore.judging.judge import judge_key
from evalcore.judging.protocol import JudgeProtocol, load_protocol
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions
from evalcore.judging.scores import grade_summary
from evalcore.models import load_backend, parse_model_args

REFERENCE_MODES = ("given", "judge", "none")
DEFAULT_MAX_NEW_TOKENS = 1024  # MT-Bench's answer length per turn


def register(subparsers) -> None:
    """Adds ``judge grade`` to the ``judge`` command (registered after evalcore.cli.judge)."""
    grade = judge_commands(subparsers).add_parser("grade", help="grade models' answers to one- and two-turn questions (1-10, MT-Bench)")
    grade.add_argument("--questions", required=True, metavar="FILE|sample",
                       help="FastChat question.jsonl, or 'sample' (the bundled two-turn set)")
    grade.add_argument("--references", default=None, metavar="FILE", help="FastChat reference_answer/*.jsonl")
    grade.add_argument("--limit", type=int, default=None, help="use only the first N questions")
    grade.add_argument("--answers-from", action="append", default=[], metavar="NAME=BACKEND:ARGS",
                       help="a model that answers (repeat); keys gen.max_new_tokens, gen.system as in judge run")
    grade.add_argument("--answers", action="append", default=[], metavar="NAME=FILE",
                       help="a model's pre-generated answers in FastChat's model_answer format (repeat)")
    grade.add_argument("--judge", "--model", dest="judge", required=True, help="judge backend: hf, vllm or openai")
    grade.add_argument("--judge-args", "--model-args", dest="judge_args", default="",
                       help="comma-separated key=value, e.g. path=DIR,dtype=float32")
    grade.add_argument("--protocol", default="mt-bench",
                       help="a grading family (mt-bench, or mt-bench-logprob: expected ratings from log-probabilities), "
                            "a one-turn single protocol (bundled name or YAML file), or FastChat's judge_prompts.jsonl "
                            "(its single-answer prompts; FILE.jsonl:NAME for one of them)")
    grade.add_argument("--protocol-multi", default=None, metavar="NAME|FILE|FILE.jsonl:NAME",
                       help="with a one-turn --protocol: the two-turn protocol that grades turn 2")
    add_judge_token_limit(grade)
    grade.add_argument("--reference-mode", default="given",
                       help="given (the questions' references), judge (the judge writes them first) or none")
    grade.add_argument("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS,
                       help=f"answer (and judge reference) length per turn (default {DEFAULT_MAX_NEW_TOKENS})")
    grade.add_argument("--out", required=True, metavar="DIR", help="output folder")
    grade.add_argument("--cache", default=None, metavar="FILE", help="SQLite cache (default DIR/cache.sqlite)")
    grade.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals")
    grade.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds over questions")
    grade.set_defaults(func=run_grade)


def _write_jsonl(path: Path, rows) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(path)


def write_json(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n",
                   encoding="utf-8")  # fmt: skip
    tmp.replace(path)


def prepare_out(text: str) -> Path:
    """``--out`` created and proven writable (before any model loads); CliError naming the problem."""
    out = Path(text)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise CliError(f"--out {text}: not a writable folder ({exc.strerror or exc})") from None
    return out


def _answer_specs(args) -> list[tuple]:
    """(name, backend, backend args, max_new_tokens, system) per --answers-from, and (name, path) per --answers."""
    specs = []
    for text in args.answers_from:
        name, backend, backend_args, settings = parse_model_spec(text)
        given = any(part.strip().startswith("gen.max_new_tokens=") for part in text.partition(":")[2].split(","))
        specs.append(("model", name, backend, backend_args, settings.max_new_tokens if given else args.max_new_tokens,
                      settings.system))  # fmt: skip
    for text in args.answers:
        name, sep, path = text.partition("=")
        if not sep or not name.strip() or not path.strip() or "/" in name:
            raise CliError(f"--answers {text!r} is not NAME=FILE (NAME without '/')")
        specs.append(("file", name.strip(), path.strip()))
    if not specs:
        raise CliError("give at least one model to grade: --answers-from NAME=BACKEND:ARGS or --answers NAME=FILE")
    names = [s[1] for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CliError(f"model name {twice[0]!r} is given twice")
    return specs


def _one_protocol(spec: str, max_new_tokens: int) -> JudgeProtocol:
    """A bundled name, a YAML file, or one prompt of a FastChat file (``FILE.jsonl:NAME``)."""
    found = split_spec(spec)
    if found is None:
        return load_protocol(spec)
    if found[1] is None:
        raise CliError(f"{spec!r} names a whole FastChat prompt file; name one prompt in it as {spec}:NAME")
    return load_spec(spec, max_new_tokens=max_new_tokens)


def _family(args, questions) -> GradingProtocols:
    fastchat = split_spec(args.protocol)
    limit = fastchat_token_limit(args, fastchat is not None or split_spec(args.protocol_multi or "") is not None)
    if fastchat is not None and fastchat[1] is None:  # FastChat's whole prompt set: its single-answer judges
        if args.protocol_multi is not None:
            raise CliError(f"--protocol-multi completes one prompt; the FastChat file {args.protocol} gives its own "
                           "two-turn prompts (or name one prompt: --protocol FILE.jsonl:NAME)")  # fmt: skip
        family = fastchat_grading_family(read_fastchat_prompts(fastchat[0], max_new_tokens=limit), label=args.protocol)
    elif args.protocol_multi is not None:
        if args.protocol in FAMILIES:
            raise CliError(f"--protocol-multi completes a one-turn --protocol; the {args.protocol} family has its own")
        single = family_of_one(_one_protocol(args.protocol, limit), args.protocol).single
        multi = _one_protocol(args.protocol_multi, limit)
        if multi.kind != "single" or multi.turns != 2 or multi.uses_reference != single.uses_reference:
            guided = "with" if single.uses_reference else "without"
            raise CliError(f"--protocol-multi {args.protocol_multi!r} is not a two-turn single-answer protocol "
                           f"{guided} a reference, as --protocol is (turns: 2, kind: single)")  # fmt: skip
        family = GradingProtocols(single=single, single_multi=multi)
    elif fastchat is not None:
        family = family_of_one(_one_protocol(args.protocol, limit), args.protocol)
    else:
        family = load_grading_protocols(args.protocol)
    if family.single_multi is None and any(len(q.turns) > 1 for q in questions):
        raise CliError(f"the questions have two turns and --protocol {args.protocol} grades one: add --protocol-multi "
                       "FILE (a two-turn single protocol) or use --protocol mt-bench")  # fmt: skip
    if args.reference_mode == "judge" and family.reference is None and not family.all_guided:
        raise CliError(f"--reference-mode judge: --protocol {args.protocol} has no reference-guided member, "
                       "so the judge's references would not be used (use --protocol mt-bench)")  # fmt: skip
    if family.all_guided and args.reference_mode == "none":
        raise CliError(f"--reference-mode none: --protocol {args.protocol} grades against reference answers only")
    return family


def _questions(args):
    source = SAMPLE_QUESTIONS if args.questions == "sample" else Path(args.questions)
    questions = read_questions(source, references_path=args.references)
    return questions[: args.limit] if args.limit is not None else questions


def _cost(store: SqliteStore, key: str, metered: MeteredBackend, computed: int) -> dict:
    """Cost per 1,000 grades over every grade this judge computed in this cache (each invocation adds
    its own; a re-run from the cache adds nothing, so the figure stays that of the runs that graded)."""
    total = store.get_many([key]).get(key) or {"seconds": 0.0, "grades": 0, "prompt_tokens": 0,
                                                "completion_tokens": 0, "tokens_unknown": False}  # fmt: skip
    if computed or metered.calls:
        prompt, completion = metered.prompt_tokens, metered.completion_tokens
        total = {"seconds": total["seconds"] + metered.seconds, "grades": total["grades"] + computed,
                 "prompt_tokens": total["prompt_tokens"] + (prompt or 0),
                 "completion_tokens": total["completion_tokens"] + (completion or 0),
                 "tokens_unknown": total["tokens_unknown"] or prompt is None or completion is None}  # fmt: skip
        store.put_many({key: total})
    unknown = total["tokens_unknown"]
    return cost_per_1000(seconds=total["seconds"], judgments=total["grades"],
                         prompt_tokens=None if unknown else total["prompt_tokens"],
                         completion_tokens=None if unknown else total["completion_tokens"])  # fmt: skip


def run_grade(args: argparse.Namespace) -> int:
    check_option(args.rounds, "--rounds")
    check_option(args.seed, "--seed", minimum=0)
    check_option(args.max_new_tokens, "--max-new-tokens")
    check_option(args.limit, "--limit")
    if args.reference_mode not in REFERENCE_MODES:
        raise CliError(f"--reference-mode must be one of {', '.join(REFERENCE_MODES)}, not {args.reference_mode!r}")
    specs = _answer_specs(args)
    questions = _questions(args)
    family = _family(args, questions)
    judge_args = parse_model_args(args.judge_args)
    from_files = {}
    for spec in specs:  # every answers file is read before any model loads
        if spec[0] == "file":
            try:
                from_files[spec[1]] = read_model_answers(spec[2], questions)
            except ValueError as exc:
                raise CliError(f"--answers {spec[1]}: {exc}") from None
    out = prepare_out(args.out)
    store = SqliteStore(args.cache or out / "cache.sqlite")
    judge = load_backend(args.judge, **judge_args)
    loaded = {(args.judge, tuple(sorted(judge_args.items()))): judge}
    counts = {"answer_turns_generated": 0}
    answers, sources, notes = {}, {}, []
    (out / "answers").mkdir(exist_ok=True)
    for spec in specs:
        name = spec[1]
        if spec[0] == "file":
            answers[name], sources[name] = from_files[name], {"from": "file", "file": str(spec[2])}
        else:
            answers[name], sources[name], backend = model_answers(spec, questions, loaded, AnswerCache(store), counts)
            if backend is judge:
                notes.append(f"the judge also answered as {name!r}: its grade may carry self-preference")
        _write_jsonl(out / "answers" / f"{name}.jsonl", model_answer_rows(name, questions, answers[name]))
    identity = judge_key(judge)
    cache = JudgmentCache(store, judge_key=identity, protocol_sha256=family.sha256)
    metered = MeteredBackend(judge)
    references = None
    if args.reference_mode == "judge":
        references = judge_references(metered, questions, max_new_tokens=args.max_new_tokens, cache=cache,
                                      categories=None if family.all_guided else family.reference_categories)
    graded = questions if args.reference_mode == "given" else [replace(q, references=()) for q in questions]
    rows, scores = [], {}
    category = {q.question_id: q.category for q in questions}
    for name in answers:
        grades = grade_conversations(metered, family, graded, answers[name], references=references, cache=cache)
        scores[name] = {}
        for g in grades:
            question_id, _, turn = str(g.item_id).rpartition("/t")
            ok = g.status == "ok"
            scores[name][str(g.item_id)] = g.score if ok else None
            rows.append({"model": name, "question_id": question_id, "turn": int(turn), "item_id": str(g.item_id),
                         "category": category[question_id], "score": g.score if ok else None, "status": g.status,
                         "error": g.error, "protocol": g.protocol, "protocol_sha256": g.protocol_sha256,
                         "reference": args.reference_mode if g.reference else None, "raw": g.raw,
                         "prompt_sha256": g.prompt_sha256, "cached": g.cached,
                         "grade_method": "logprob" if g.probabilities is not None else "parsed",
                         "probabilities": list(g.probabilities) if g.probabilities is not None else None,
                         "mass": g.mass, "entropy": g.entropy})  # fmt: skip
    members = [getattr(family, r) for r in ("single", "single_multi", "reference", "reference_multi")]
    for name in answers:
        found = verdict_lookalikes(members, [t for turns in answers[name] for t in turns])
        if found:
            notes.append(f"{found} answer turn(s) of {name!r} contain a rating in FastChat's verdict form ([[n]] or "
                         "[n]); FastChat's rule reads the first rating the judge writes, so a judge quoting one is "
                         "read as the answer says")  # fmt: skip
    computed = sum(1 for r in rows if not r["cached"])
    _write_jsonl(out / "grades.jsonl", rows)
    categories = {q.question_id: q.category for q in questions if q.category}
    summary = grade_summary(scores, categories=categories, rounds=args.rounds, seed=args.seed,
                            bounds=grade_bounds(family))  # fmt: skip
    cost = _cost(store, f"gradecost:{identity}:{family.sha256}:{args.reference_mode}", metered, computed)
    members = {role: {"name": p.name, "sha256": p.sha256, "verdict": p.verdict.as_dict(), "source": p.source}
               for role in ("single", "single_multi", "reference", "reference_multi")
               if (p := getattr(family, role)) is not None}  # fmt: skip
    report = {
        "kind": "single",
        "judge": judge.identity.as_dict(), "judge_key": identity,
        "protocol": {"family": args.protocol, "sha256": family.sha256, "members": members,
                     "reference_categories": list(family.reference_categories)},
        "reference_mode": args.reference_mode,
        "questions": {"source": "sample" if args.questions == "sample" else args.questions,
                      "references": args.references, "count": len(questions),
                      "turns": sum(len(q.turns) for q in questions), "sha256": question_set_sha256(questions)},
        "max_new_tokens": args.max_new_tokens,
        "models": {name: {**summary[name], "answers": {**sources[name],
                                                      "sha256": answers_sha256(questions, answers[name])}}
                   for name in answers},
        "grades": {"total": len(rows), "failed": sum(1 for r in rows if r["status"] != "ok")},
        "cost": cost, "notes": notes, "rounds": args.rounds, "seed": args.seed,
        "this_run": {"grades_computed": computed, "grades_cached": len(rows) - computed, "judge_calls": metered.calls,
                     **counts},
    }  # fmt: skip
    write_json(out / "report.json", report)
    _print_report(report)
    return _failure_exit(rows)


def _failure_exit(rows) -> int:
    failed = [r for r in rows if r["status"] != "ok"]
    if not failed:
        return 0
    first = failed[0]
    print(f"error: {len(failed)} of {len(rows)} grades failed (recorded as failed, not scores); "
          f"first: model {first['model']}, {first['item_id']}: {first['error']}", file=sys.stderr)
    return 1


def _print_report(report: dict) -> None:
    def cell(v):
        return "-" if v is None else f"{v:.2f}"

    print(f"{'model':<24} {'mean':>6} {'95% interval':>16} {'n':>5} {'failed':>6}")
    for name, v in report["models"].items():
        interval = "-" if v["ci_low"] is None else f"[{v['ci_low']:.2f}, {v['ci_high']:.2f}]"
        print(f"{name:<24} {cell(v['mean']):>6} {interval:>16} {v['n']:>5} {v['failed']:>6}")
    run = report["this_run"]
    print(f"{report['grades']['total']} grades: {run['grades_computed']} computed, {run['grades_cached']} from the cache")


def grade_key(report: dict) -> str:
    """What makes two grade runs the same judge: judge key, protocol family and reference mode."""
    payload = json.dumps([report.get("judge_key"), report.get("protocol", {}).get("sha256"),
                          report.get("reference_mode")])  # fmt: skip
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
