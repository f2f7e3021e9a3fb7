"""``python -m evalcore judge panel``: several judges' runs on the same questions combined into one panel.

    python -m evalcore judge panel [NAME=]DIR [NAME=]DIR [...] --out DIR [--rounds R] [--seed S]

Each DIR is the ``--out`` of a ``judge grade`` run (``report.json`` + ``grades.jsonl``: a panel of
graded answers, :func:`evalcore.judging.panel.panel_grades`) or of a ``judge run`` (``results.json`` +
``judgments.jsonl`` + ``answers/``: a pairwise panel, :func:`evalcore.judging.panel.panel_pairwise`,
each judgment the swap average of its two orders). A judge is named by NAME, else by its folder's
name. Refused with one line: fewer than two folders, a folder that is neither, mixed kinds, different
question sets, a model whose answers differ between runs, the same judge (judge weights, protocol
and reference mode) twice, two judges with one name. Writes ``DIR/panel.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from evalcore.boundary import boundedjson
from evalcore.cli import CliError, check_option
from evalcore.cli.grade import grade_key, prepare_out, write_json
from evalcore.cli.judge import judge_commands
from evalcore.judging.panel import panel_grades, panel_pairwise

MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_REPORT_BYTES = 64 * 1024 * 1024


def register(subparsers) -> None:
    """Adds ``judge panel`` to the ``judge`` command (registered after evalcore.cli.judge)."""
    panel = judge_commands(subparsers).add_parser(
        "panel", help="combine several judges' grade (or run) folders on the same questions into a panel")
    panel.add_argument("dirs", nargs="+", metavar="[NAME=]DIR", help="a judge grade or judge run --out folder")
    panel.add_argument("--out", required=True, metavar="DIR", help="output folder (panel.json)")
    panel.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals")
    panel.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds")
    panel.set_defaults(func=run_panel)


def _json_file(path: Path) -> dict:
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise CliError(f"{path} is larger than {MAX_REPORT_BYTES} bytes")
    data = boundedjson.loads(path.read_bytes(), name=str(path), max_depth=16)
    if not isinstance(data, dict):
        raise CliError(f"{path}: expected a JSON object")
    return data


def _jsonl(path: Path):
    """(where, object) of every non-blank line of a bounded JSONL file."""
    if not path.is_file():
        raise CliError(f"{path.parent}: {path.name} is missing")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise CliError(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}: line {lineno}"
            if len(raw) > MAX_LINE_BYTES:
                raise CliError(f"{where} is longer than {MAX_LINE_BYTES} bytes")
            if raw.strip():
                record = boundedjson.loads(raw, name=where, max_depth=8)
                if not isinstance(record, dict):
                    raise CliError(f"{where}: expected a JSON object")
                yield where, record


def _text(record: dict, key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise CliError(f"{where}: {key} must be a non-empty string")
    return value


def _member(text: str) -> tuple[str, Path]:
    if not Path(text).is_dir() and "=" in text:
        name, _, folder = text.partition("=")
        if not name.strip():
            raise CliError(f"{text!r}: the judge name before '=' is empty")
        return name.strip(), Path(folder)
    return Path(text).resolve().name or text, Path(text)


def _read_grades(folder: Path, report: dict) -> tuple[dict, dict]:
    """(model -> item -> score or None, what identifies the member) of a judge grade folder."""
    models = report.get("models")
    questions = report.get("questions")
    if not isinstance(models, dict) or not isinstance(questions, dict) or not isinstance(questions.get("sha256"), str):
        raise CliError(f"{folder}/report.json is not a judge grade report (models, questions.sha256)")
    scores: dict[str, dict] = {m: {} for m in models}
    for where, row in _jsonl(folder / "grades.jsonl"):
        model, item = _text(row, "model", where), _text(row, "item_id", where)
        if model not in scores:
            raise CliError(f"{where}: model {model!r} is not in report.json")
        if item in scores[model]:
            raise CliError(f"{where}: model {model!r} has {item!r} twice")
        score = row.get("score")
        if row.get("status") != "ok":
            score = None
        elif isinstance(score, bool) or not isinstance(score, int | float):
            raise CliError(f"{where}: an ok grade needs a numeric score, got {score!r:.50}")
        scores[model][item] = score
    answers = {m: (v.get("answers") or {}).get("sha256") if isinstance(v, dict) else None for m, v in models.items()}
    ident = {"kind": "single", "questions": questions["sha256"], "answers": answers, "same_judge": grade_key(report),
             "judge": report.get("judge"), "protocol": report.get("protocol"),
             "reference_mode": report.get("reference_mode")}  # fmt: skip
    return scores, ident


def _sha(payload) -> str:
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def _read_pairwise(folder: Path, results: dict) -> tuple[list, dict]:
    """(model, baseline, instruction id, swap-average P(model better) or None) per pair, and the member's
    identity, of a judge run folder."""
    baseline = results.get("baseline")
    if not isinstance(baseline, str) or not isinstance(results.get("models"), dict):
        raise CliError(f"{folder}/results.json is not a judge run result (baseline, models)")
    answers, questions = {}, None
    for name in [baseline, *results["models"]]:
        # instruction runs write (instruction_id, instruction, answer); question runs (--questions) FastChat's
        # model_answer rows (question_id, choices), their question set identified in results.json
        rows = [(r.get("instruction_id", r.get("question_id")), r.get("instruction"), r.get("answer", r.get("choices")))
                for _, r in _jsonl(folder / "answers" / f"{name}.jsonl")]  # fmt: skip
        answers[name] = _sha(rows)
        if name == baseline:
            asked = results.get("questions")
            questions = asked.get("sha256") if isinstance(asked, dict) else _sha([r[:2] for r in rows])
    orders: dict[tuple[str, str], dict] = {}
    for where, row in _jsonl(folder / "judgments.jsonl"):
        model, pair_id, order = _text(row, "model", where), _text(row, "pair_id", where), row.get("order")
        if model not in results["models"] or not pair_id.startswith(model + "/") or order not in ("ab", "ba"):
            raise CliError(f"{where}: not a judgment of judge run (model, pair_id '<model>/<id>', order ab|ba)")
        first = None
        if row.get("status") == "ok":
            first = row.get("p_first")
            if first is None:
                first = {"A": 1.0, "B": 0.0, "tie": 0.5}.get(row.get("winner"))
            if isinstance(first, bool) or not isinstance(first, int | float) or not 0.0 <= first <= 1.0:
                raise CliError(f"{where}: an ok judgment needs p_first in [0, 1] or winner A, B or tie")
        key = (model, pair_id[len(model) + 1:])
        if order in orders.setdefault(key, {}):
            raise CliError(f"{where}: pair {pair_id!r} order {order} appears twice")
        orders[key][order] = first
    judged = []
    for (model, item), pair in sorted(orders.items()):
        ab, ba = pair.get("ab"), pair.get("ba")  # "ab" shows the baseline first
        judged.append((model, baseline, item, None if ab is None or ba is None else ((1 - ab) + ba) / 2))
    protocol = results.get("protocol") or {}
    ident = {"kind": "pairwise", "questions": questions, "answers": answers, "judge": results.get("judge"),
             "protocol": protocol, "same_judge": _sha([results.get("judge"), protocol.get("sha256")])}  # fmt: skip
    return judged, ident


def _read_member(folder: Path):
    if not folder.is_dir():
        raise CliError(f"{folder} is not a folder")
    if (folder / "report.json").is_file():
        report = _json_file(folder / "report.json")
        if report.get("kind") == "single":
            return _read_grades(folder, report)
    if (folder / "results.json").is_file():
        return _read_pairwise(folder, _json_file(folder / "results.json"))
    raise CliError(f"{folder} holds neither a judge grade report.json nor a judge run results.json")


def _check_members(members: dict) -> None:
    """Refuse a panel that cannot be formed, naming the folders."""
    items = list(members.values())
    first = items[0]
    for folder, _, ident in items[1:]:
        if ident["kind"] != first[2]["kind"]:
            raise CliError(f"{first[0]} holds {first[2]['kind']} grades and {folder} {ident['kind']} judgments: "
                           "a panel combines judges of one kind")  # fmt: skip
        if ident["questions"] != first[2]["questions"]:
            raise CliError(f"{folder} and {first[0]} graded different question sets: a panel needs the same questions")
    seen_judge: dict[str, Path] = {}
    answers: dict[str, tuple[str, Path]] = {}
    for folder, _, ident in items:
        if ident["same_judge"] in seen_judge:
            raise CliError(f"{folder} and {seen_judge[ident['same_judge']]} are the same judge (weights, protocol and "
                           "reference mode): a panel counts each judge once")  # fmt: skip
        seen_judge[ident["same_judge"]] = folder
        for model, sha in ident["answers"].items():
            if model in answers and sha != answers[model][0]:
                raise CliError(f"model {model!r} has different answers in {folder} and {answers[model][1]}: "
                               "the judges must grade the same answers")  # fmt: skip
            answers.setdefault(model, (sha, folder))


def run_panel(args: argparse.Namespace) -> int:
    check_option(args.rounds, "--rounds")
    check_option(args.seed, "--seed", minimum=0)
    if len(args.dirs) < 2:
        raise CliError("a panel needs at least two judge folders")
    members: dict[str, tuple] = {}
    resolved: dict[Path, str] = {}
    for text in args.dirs:
        name, folder = _member(text)
        if folder.resolve() in resolved:
            raise CliError(f"{folder} is given twice: a panel counts each judge once")
        if name in members:
            raise CliError(f"two judges are named {name!r}: name them NAME=DIR")
        resolved[folder.resolve()] = name
        data, ident = _read_member(folder)
        members[name] = (folder, data, ident)
    _check_members(members)
    out = prepare_out(args.out)
    kind = next(iter(members.values()))[2]["kind"]
    combine = panel_grades if kind == "single" else panel_pairwise
    report = combine({name: m[1] for name, m in members.items()}, rounds=args.rounds, seed=args.seed)
    report.update(kind=kind, questions_sha256=next(iter(members.values()))[2]["questions"], members={
        name: {"dir": str(folder), "judge": ident["judge"], "protocol": ident["protocol"],
               **({"reference_mode": ident["reference_mode"]} if "reference_mode" in ident else {})}
        for name, (folder, _, ident) in members.items()
    })  # fmt: skip
    write_json(out / "panel.json", report)
    _print_panel(report)
    return 0


def _print_panel(report: dict) -> None:
    def cell(v):
        return "-" if v is None else f"{v:.3f}"

    if report["kind"] == "single":
        print(f"{'model':<24} {'panel z':>8} {'95% interval':>18} {'n':>5}")
        for name, v in report["models"].items():
            interval = "-" if v["ci_low"] is None else f"[{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
            print(f"{name:<24} {cell(v['mean']):>8} {interval:>18} {v['n']:>5}")
        print(f"{'judge':<24} {'pearson':>8} {'kendall tau':>12}")
        for name, v in report["judges"].items():
            print(f"{name:<24} {cell(v['pearson']['value']):>8} {cell(v['kendall_tau']['value']):>12}")
    else:
        print(f"{'model':<24} {'rating':>8} {'95% interval':>20}")
        for name, v in (report["ratings"] or {}).items():
            print(f"{name:<24} {v['rating']:>8.1f} {'[' + format(v['ci_low'], '.1f') + ', ' + format(v['ci_high'], '.1f') + ']':>20}")
        print(f"{'judge':<24} {'agreement':>10}")
        for name, v in report["judges"].items():
            print(f"{name:<24} {cell(v['agreement']['value']):>10}")
    print(f"most disagreeing: {report['most_disagreeing'] or '-'}")
