"""FastChat llm_judge's judge prompts (its ``judge_prompts.jsonl``, as the user supplies it) as protocols.

::

    prompts = read_fastchat_prompts("judge_prompts.jsonl")   # name -> JudgeProtocol, in file order
    family = fastchat_grading_family(prompts)                # single-v1, single-math-v1, and their -multi-turn
    pairwise = fastchat_pairwise_family(prompts)             # pair-v2, pair-math-v1, and their -multi-turn

A protocol *spec* names a file, its whole prompt set (``judge_prompts.jsonl``), or one prompt in it
(``judge_prompts.jsonl:single-v1``); :func:`split_spec` tells them apart.

**The file.** One JSON object a line with ``name``, ``type`` (``single`` or ``pairwise``),
``system_prompt``, ``prompt_template`` and ``output_format``; ``description`` and ``category`` are
kept, other keys ignored (as FastChat ignores them). A malformed line, an unknown type or output
format, or a name given twice (FastChat would silently keep the later one) is refused with a
ValueError naming the line.

**The prompt, exactly as FastChat renders it.** FastChat fills ``prompt_template`` with Python's
``str.format`` and sends ``system_prompt`` as written, as the system message (no system message
when it is empty). The template is converted to Podium's placeholders once, at load time:
``{question}``, ``{answer}``, ``{answer_a}``, ``{answer_b}``; two-turn ``{question_1}``,
``{question_2}``, ``{answer_1}``, ``{answer_2}``, ``{answer_a_1}``...``{answer_b_2}``; FastChat's
``{ref_answer_1}`` and ``{ref_answer_2}`` become ``{reference}`` (one turn) or ``{reference_1}`` and
``{reference_2}``. ``{{`` and ``}}`` become single braces, as ``str.format`` makes them. Refused,
with the reason: a field FastChat does not fill for that prompt (it would raise KeyError), a format
spec, conversion, attribute or index (``{answer!r}``, ``{answer.x}``), a template missing the
question or an answer, and literal text that reads as a placeholder once unescaped (in the template,
or in the system prompt, which FastChat never fills), since it could not be told from one.

**The verdict.** ``parse: fastchat`` with the line's ``output_format`` (see
:func:`evalcore.judging.judge.parse_score`: the first ``[[n]]``, else the first ``[n]``; the first of
``[[A]]``, ``[[B]]``, ``[[C]]``), generated greedily with up to 2,048 new tokens (FastChat's limit
for its GPT judges).

**Which prompt grades what.** FastChat's names: ``single-v1`` grades turn 1, ``single-v1-multi-turn``
turn 2 in context, ``single-math-v1`` and ``single-math-v1-multi-turn`` the same against the reference
answers of questions in FastChat's reference categories (``math``, ``reasoning``, ``coding``,
``arena-hard-200``); ``pair-v2``, ``pair-v2-multi-turn``, ``pair-math-v1``, ``pair-math-v1-multi-turn``
for pairs. A file without one of these names fills that role with its only prompt of the same shape
(type, one or two turns, with or without a reference); two candidates are refused as ambiguous.

**Which wording.** Each protocol's ``source`` says which file and prompt it came from and whether
its content is one of the prompts FastChat has published (:data:`PUBLISHED`, by content hash), so a
report can tell FastChat's MT-Bench judge from a modified copy.
"""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path

from evalcore.boundary import boundedjson
from evalcore.judging.grading import GradingProtocols
from evalcore.judging.judge import FASTCHAT_LABELS, FASTCHAT_ONE_SCORE, FASTCHAT_TWO_SCORES, PairwiseProtocols
from evalcore.judging.protocol import PLACEHOLDER, JudgeProtocol, protocol_from_dict, required_placeholders

MAX_FILE_BYTES = 1024 * 1024
MAX_PROMPTS = 200
MAX_NAME_CHARS = 200
MAX_NEW_TOKENS = 2048  # FastChat's max_tokens for its GPT-4 / GPT-3.5 judges
TYPES = ("single", "pairwise")
OUTPUT_FORMATS = {"single": ("[[rating]]",), "pairwise": ("[[A]]", "[[rating_a,rating_b]]")}
REQUIRED_KEYS = ("name", "type", "system_prompt", "prompt_template", "output_format")
TEXT_KEYS = ("description", "category")
# FastChat's NEED_REF_CATS (fastchat/llm_judge/common.py): questions graded against a reference answer
REFERENCE_CATEGORIES = ("math", "reasoning", "coding", "arena-hard-200")
# role -> (FastChat's name, type, turns, reference-guided)
ROLES = {
    "single": ("single-v1", "single", 1, False),
    "single_multi": ("single-v1-multi-turn", "single", 2, False),
    "reference": ("single-math-v1", "single", 1, True),
    "reference_multi": ("single-math-v1-multi-turn", "single", 2, True),
    "pair": ("pair-v2", "pairwise", 1, False),
    "pair_multi": ("pair-v2-multi-turn", "pairwise", 2, False),
    "pair_reference": ("pair-math-v1", "pairwise", 1, True),
    "pair_reference_multi": ("pair-math-v1-multi-turn", "pairwise", 2, True),
}
# The fields FastChat fills, per (type, turns), and the Podium placeholder each becomes.
FIELDS = {
    ("single", 1): {"question": "question", "answer": "answer", "ref_answer_1": "reference"},
    ("single", 2): {"question_1": "question_1", "question_2": "question_2", "answer_1": "answer_1",
                    "answer_2": "answer_2", "ref_answer_1": "reference_1", "ref_answer_2": "reference_2"},
    ("pairwise", 1): {"question": "question", "answer_a": "answer_a", "answer_b": "answer_b",
                      "ref_answer_1": "reference"},
    ("pairwise", 2): {"question_1": "question_1", "question_2": "question_2", "answer_a_1": "answer_a_1",
                      "answer_a_2": "answer_a_2", "answer_b_1": "answer_b_1", "answer_b_2": "answer_b_2",
                      "ref_answer_1": "reference_1", "ref_answer_2": "reference_2"},
}  # fmt: skip
TWO_TURN_FIELDS = {"question_1", "question_2", "answer_1", "answer_2", "answer_a_1", "answer_a_2", "answer_b_1",
                   "answer_b_2", "ref_answer_2"}  # fmt: skip

# The wording hashes (:func:`wording_sha256`, as this module converts them) of the prompts FastChat has
# published in fastchat/llm_judge/data/judge_prompts.jsonl on its main branch: the release of 2023-06-16
# (b494d0c6) and the update of 2023-07-04 (7ad1d638, which reworded the pairwise prompts); name -> hashes.
PUBLISHED: dict[str, tuple[str, ...]] = {
    "pair-v2": ("9afc2a47f8307111e3bded5747c89578827f06f5fd7a8ba42014e3f799e4cac6",
                "a685b5327de02f0e89128dc14c2d7b0a834a2d45fe34cf15c2d101eb5b67468c"),
    "pair-v2-multi-turn": ("11424476a494569defceceef5b324d1b077d795bf3c916df9fc3c23b818e36d2",
                           "2f9efaf0c3129101f4777502677864bc30c1ef359ecddcc74f1b5c29ce6933f2"),
    "pair-math-v1": ("07d799b658c5d1b81b3306906a887077f895122812836ace606711633a88f552",
                     "fa5a967c6b1d31688ac0c09823fa9742e228a7c72b18f908f224f4a979ca3883"),
    "pair-math-v1-multi-turn": ("3688ea4621a7ab6dabee3452bb26e2786178e110e76dfab554258436c03832ef",
                                "6b0c4a0c2afa821f199419f426c90074c5f989d8f98d6fe8ed4cba7882d5c18a"),
    "single-v1": ("3e7db23a3fa32edf5a5117c1ced0bd497448516bcb0cedf15c42cf027be90eec",),
    "single-v1-multi-turn": ("16162a813d9201a9648b4a6b301751acdc160c73691dd2c9acaaeac069d0575f",),
    "single-math-v1": ("5b19cfb5c8ffa0e12facb438296e7e14406de7aefe52b11f4820fc2fec96520f",),
    "single-math-v1-multi-turn": ("5e2625b34d8cea264d630f366b834c64e9a57fde28aceaf63b805e0baa7ac764",),
}  # fmt: skip


def split_spec(spec: str | Path) -> tuple[Path, str | None] | None:
    """``(file, prompt name or None)`` when ``spec`` names a FastChat prompt file (``FILE.jsonl`` or
    ``FILE.jsonl:NAME``), else None (a bundled name or a YAML protocol file)."""
    text = str(spec)
    if text.endswith(".jsonl"):
        return Path(text), None
    head, sep, name = text.rpartition(":")
    if sep and head.endswith(".jsonl") and name and "/" not in name:
        return Path(head), name
    return None


def read_fastchat_prompts(source: str | Path, *, text: str | None = None,
                          max_new_tokens: int = MAX_NEW_TOKENS) -> dict[str, JudgeProtocol]:  # fmt: skip
    """Every prompt in a FastChat ``judge_prompts.jsonl``: name -> JudgeProtocol, in file order.

    Parameters
    ----------
    source : str or Path
        The file, or (with ``text``) a label for error messages.
    text : str, optional
        The file's content, when it does not come from disk (an admin's pasted copy).
    max_new_tokens : int
        The judge's token limit for every prompt (FastChat's 2,048 by default; recorded in each verdict).
    """
    label = str(source)
    if text is None:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"FastChat prompt file {label!r} does not exist")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"FastChat prompt file {label!r} is larger than {MAX_FILE_BYTES} bytes")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"FastChat prompt file {label!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    elif len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise ValueError(f"{label}: larger than {MAX_FILE_BYTES} bytes")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    prompts: dict[str, JudgeProtocol] = {}
    lines: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{label}: line {lineno}"
        record = boundedjson.loads(line, name=where)
        protocol = prompt_from_record(record, where=where, file_sha256=digest, file_label=label,
                                      max_new_tokens=max_new_tokens)  # fmt: skip
        if protocol.name in lines:
            raise ValueError(f"{where}: the prompt name {protocol.name!r} is also on line {lines[protocol.name]} "
                             "(FastChat would silently use the later one); keep one")  # fmt: skip
        if len(prompts) >= MAX_PROMPTS:
            raise ValueError(f"{label}: more than {MAX_PROMPTS} prompts")
        lines[protocol.name] = lineno
        prompts[protocol.name] = protocol
    if not prompts:
        raise ValueError(f"{label} holds no prompt (one JSON object a line: name, type, system_prompt, "
                         "prompt_template, output_format)")  # fmt: skip
    return prompts


def looks_like_fastchat(text: str) -> bool:
    """Whether pasted protocol text is FastChat JSONL (its first non-blank line a JSON object with a
    ``prompt_template``) rather than a YAML protocol."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if not first.lstrip().startswith("{"):
        return False
    try:
        record = json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(record, dict) and "prompt_template" in record


def prompt_from_record(record, *, where: str = "prompt", file_sha256: str = "", file_label: str = "",
                       max_new_tokens: int = MAX_NEW_TOKENS) -> JudgeProtocol:  # fmt: skip
    """One FastChat prompt line (parsed JSON) as a protocol; ValueError naming the problem."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a FastChat prompt must be a JSON object with {', '.join(REQUIRED_KEYS)}")
    for key in REQUIRED_KEYS:
        if key not in record:
            raise ValueError(f"{where}: missing key {key!r} (a FastChat prompt has {', '.join(REQUIRED_KEYS)})")
        if not isinstance(record[key], str):
            raise ValueError(f"{where}: {key!r} must be a string")
    for key in TEXT_KEYS:
        if key in record and record[key] is not None and not isinstance(record[key], str):
            raise ValueError(f"{where}: {key!r} must be a string")
    name = record["name"]
    if not name.strip() or len(name) > MAX_NAME_CHARS or name != name.strip() or any(c in name for c in ":/\n\r\t"):
        raise ValueError(f"{where}: name must be 1 to {MAX_NAME_CHARS} characters without ':', '/', tabs, line "
                         "breaks or surrounding spaces")  # fmt: skip
    where = f"{where} ({name})"
    kind = record["type"]
    if kind not in TYPES:
        raise ValueError(f"{where}: type {kind!r} is not one of {', '.join(TYPES)}")
    output_format = record["output_format"]
    if output_format not in OUTPUT_FORMATS[kind]:
        raise ValueError(f"{where}: output_format {output_format!r} is not one FastChat reads for a {kind} prompt "
                         f"({', '.join(OUTPUT_FORMATS[kind])})")  # fmt: skip
    user, turns = _converted_template(record["prompt_template"], kind, where)
    system = record["system_prompt"]
    if PLACEHOLDER.search(system):
        raise ValueError(f"{where}: the system prompt holds {PLACEHOLDER.search(system).group(0)}, which FastChat "
                         "sends as written but would read here as a placeholder")  # fmt: skip
    protocol = protocol_from_dict({
        "name": name, "kind": kind, "turns": turns, "system": system or None, "user": user,
        "verdict": {"method": "generate", "max_new_tokens": max_new_tokens, "parse": "fastchat",
                    "output_format": output_format},
        "description": record.get("description") or "",
    }, where=where)  # fmt: skip
    published = published_name(protocol)
    if published == name:
        wording = f"FastChat's published {name!r}, verbatim"
    elif published:
        wording = f"FastChat's published {published!r}, verbatim, under the name {name!r}"
    else:
        wording = "not a prompt FastChat has published (a modified or new prompt)"
    file_part = f"{file_label} (sha256 {file_sha256[:12]})" if file_sha256 else (file_label or "FastChat JSONL")
    source = f"FastChat judge_prompts.jsonl format: {file_part}, prompt {name!r}; {wording}"
    return JudgeProtocol(name=protocol.name, kind=protocol.kind, user=protocol.user, verdict=protocol.verdict,
                         system=protocol.system, source=source, description=protocol.description,
                         turns=protocol.turns)  # fmt: skip


def wording_sha256(protocol: JudgeProtocol) -> str:
    """SHA-256 of what the judge is shown (kind, turns, system prompt, user template): the verdict's
    settings (its token limit) play no part, so a shorter limit keeps a prompt recognised as published."""
    content = {"kind": protocol.kind, "turns": protocol.turns, "system": protocol.system, "user": protocol.user}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def published_name(protocol: JudgeProtocol) -> str | None:
    """The name of the FastChat-published prompt whose wording ``protocol`` has, or None."""
    sha = wording_sha256(protocol)
    matches = [name for name, hashes in PUBLISHED.items() if sha in hashes]
    if protocol.name in matches:
        return protocol.name
    return matches[0] if matches else None


def _converted_template(template: str, kind: str, where: str) -> tuple[str, int]:
    """FastChat's ``str.format`` template in Podium's placeholder syntax, and its number of turns."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{where}: prompt_template is not a valid str.format template ({exc})") from None
    fields = [p[1] for p in parts if p[1] is not None]
    for _, name, spec, conversion in (p for p in parts if p[1] is not None):
        if name == "" or not name.isidentifier():
            raise ValueError(f"{where}: prompt_template field {{{name}}} is not a plain name (FastChat fills named "
                             "fields only)")  # fmt: skip
        if spec or conversion:
            raise ValueError(f"{where}: prompt_template field {{{name}}} has a format spec or conversion, which "
                             "Podium does not reproduce")  # fmt: skip
    turns = 2 if set(fields) & TWO_TURN_FIELDS else 1
    mapping = FIELDS[(kind, turns)]
    for name in fields:
        if name not in mapping:
            allowed = ", ".join("{" + f + "}" for f in mapping)
            raise ValueError(f"{where}: prompt_template field {{{name}}} is not one FastChat fills in a "
                             f"{'two-turn' if turns == 2 else 'one-turn'} {kind} prompt ({allowed})")  # fmt: skip
    out, run = [], []  # run: the literal text since the last field ("{{" comes as pieces of its own)
    for literal, name, _, _ in [*parts, ("", "", "", None)]:
        run.append(literal)
        if name is None:
            continue
        found = PLACEHOLDER.search("".join(run))
        if found:
            raise ValueError(f"{where}: prompt_template holds the literal text {found.group(0)} (written "
                             f"{{{found.group(0)}}} in FastChat's syntax), which Podium cannot tell from a "
                             "placeholder")  # fmt: skip
        out.extend(run)
        run = []
        if name:
            out.append("{" + mapping[name] + "}")
    user = "".join(out)
    missing = [f for f in required_placeholders(kind, turns) if f not in fields]  # FastChat's names are Podium's
    if missing:
        raise ValueError(f"{where}: prompt_template never shows {{{missing[0]}}}, so the judge would not see it")
    return user, turns


def _role_prompt(prompts: dict[str, JudgeProtocol], role: str, label: str) -> JudgeProtocol | None:
    name, kind, turns, guided = ROLES[role]
    if name in prompts:
        protocol = prompts[name]
        if (protocol.kind, protocol.turns, protocol.uses_reference) != (kind, turns, guided):
            what = f"{kind}, {turns} turn(s), {'with' if guided else 'without'} a reference"
            raise ValueError(f"{label}: FastChat uses the prompt {name!r} as its {what} judge, but this one does not "
                             "fit that role")  # fmt: skip
        return protocol
    fits = [p for p in prompts.values() if (p.kind, p.turns, p.uses_reference) == (kind, turns, guided)]
    if len(fits) > 1:
        raise ValueError(f"{label}: no prompt is named {name!r}, and {', '.join(repr(p.name) for p in fits)} could "
                         "all take its role; name one (FILE.jsonl:NAME)")  # fmt: skip
    return fits[0] if fits else None


def fastchat_grading_family(prompts: dict[str, JudgeProtocol], *, label: str = "FastChat prompts") -> GradingProtocols:
    """The single-answer prompts as a grading family, with FastChat's reference categories."""
    members = {role: _role_prompt(prompts, role, label) for role in ("single", "single_multi", "reference",
                                                                       "reference_multi")}  # fmt: skip
    if members["single"] is None:
        raise ValueError(f"{label}: no one-turn single-answer prompt without a reference (FastChat's single-v1)")
    return GradingProtocols(**members, reference_categories=REFERENCE_CATEGORIES)


def fastchat_pairwise_family(prompts: dict[str, JudgeProtocol], *,
                             label: str = "FastChat prompts") -> PairwiseProtocols:  # fmt: skip
    """The pairwise prompts as a family, with FastChat's reference categories."""
    members = {role: _role_prompt(prompts, role, label) for role in ("pair", "pair_multi", "pair_reference",
                                                                       "pair_reference_multi")}  # fmt: skip
    if members["pair"] is None:
        raise ValueError(f"{label}: no one-turn pairwise prompt without a reference (FastChat's pair-v2)")
    return PairwiseProtocols(single=members["pair"], multi=members["pair_multi"], reference=members["pair_reference"],
                             reference_multi=members["pair_reference_multi"],
                             reference_categories=REFERENCE_CATEGORIES)  # fmt: skip


def load_spec(spec: str | Path, *, max_new_tokens: int = MAX_NEW_TOKENS) -> dict[str, JudgeProtocol] | JudgeProtocol:
    """A FastChat spec's prompts (``FILE.jsonl``) or its one named prompt (``FILE.jsonl:NAME``)."""
    found = split_spec(spec)
    if found is None:
        raise ValueError(f"{str(spec)!r} does not name a FastChat prompt file (FILE.jsonl or FILE.jsonl:NAME)")
    path, name = found
    prompts = read_fastchat_prompts(path, max_new_tokens=max_new_tokens)
    if name is None:
        return prompts
    if name not in prompts:
        raise ValueError(f"{path}: no prompt is named {name!r} (it has {', '.join(prompts)})")
    return prompts[name]


def verdict_lookalikes(protocols, texts) -> int:
    """How many of ``texts`` (answers being judged) hold a verdict in the form a FastChat-parsed protocol
    among ``protocols`` reads (``[[7]]``, ``[7]``, ``[[A]]``...). FastChat's rule takes the *first*
    verdict in the judge's text, so a judge that quotes such an answer before its own verdict is read
    as the answer says: a way for an answer to vote for itself, worth a note beside the scores."""
    formats = {p.verdict.output_format for p in protocols if p is not None and p.verdict.fastchat}
    if not formats:
        return 0
    patterns = []
    if "[[rating]]" in formats:
        patterns += list(FASTCHAT_ONE_SCORE)
    if "[[rating_a,rating_b]]" in formats:
        patterns += list(FASTCHAT_TWO_SCORES)
    labels = [label for label, _ in FASTCHAT_LABELS] if "[[A]]" in formats else []
    return sum(1 for t in texts if any(p.search(t) for p in patterns) or any(label in t for label in labels))
