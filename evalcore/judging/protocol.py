"""Judge protocols: a YAML file holding the judge's prompt and how its verdict is read.

A protocol has a ``name``, a ``kind`` (``pairwise`` or ``single``), an optional ``system`` message, a
``user`` template and a ``verdict``::

    name: my-judge
    kind: pairwise
    source: https://...            # where the prompt comes from (optional, recorded)
    system: You are a fair judge.
    user: "[Question]\\n{question}\\n[A]\\n{answer_a}\\n[B]\\n{answer_b}"
    verdict:
      method: logprob              # read P(A) / (P(A) + P(B)) after the prefix
      prefix: "My verdict: [["
      tokens: {A: "A", B: "B"}

or ``method: generate`` with ``max_new_tokens`` and ``outcomes`` (a list of ``{pattern, winner,
weight}``, ``winner`` one of ``A``, ``B``, ``tie``) for pairwise protocols, or ``score`` (``{regex,
min, max}``) for single-answer grading.

A single-answer protocol may instead read its grade from log-probabilities (G-Eval's
probability-weighted score)::

    verdict:
      method: logprob
      prefix: "Rating: [["          # appended after the judge's turn starts; must not be empty
      scale: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
      suffix: "]]"                  # ends every rating, so no rating's continuation begins another's

Each rating's continuation (``"10]]"``) is scored whole by ``loglikelihood`` after the prompt and
prefix; the grade is the expected rating under those probabilities normalised over the scale
(:mod:`evalcore.judging.grading`). The scale holds 2 to 100 distinct numbers; a continuation that is
a prefix of another (``"1"`` and ``"10"`` with no suffix) is refused, since the two events would
overlap. Placeholders are ``{question}``, ``{answer_a}``,
``{answer_b}`` (pairwise) or ``{answer}`` (single), and optionally ``{reference}``. Any other
``{identifier}`` in a template, an unknown key, a missing placeholder or two verdict strings whose
first token ids coincide is refused with a ValueError naming the problem.

A single-answer protocol may grade the second turn of a conversation in context (MT-Bench's
multi-turn judge): ``turns: 2`` makes its placeholders ``{question_1}``, ``{answer_1}``,
``{question_2}``, ``{answer_2}`` (all required) and optionally ``{reference_1}``, ``{reference_2}``.
A two-turn pairwise protocol shows both conversations: ``{question_1}``, ``{question_2}``,
``{answer_a_1}``, ``{answer_a_2}``, ``{answer_b_1}``, ``{answer_b_2}`` (all required), and the same
optional references.

A generated verdict is read by Podium's rule unless it says ``parse: fastchat``: then it is read
exactly as FastChat's llm_judge reads its judges (``output_format`` one of ``"[[rating]]"``
(single), ``"[[A]]"`` or ``"[[rating_a,rating_b]]"`` (pairwise); see
:func:`evalcore.judging.judge.parse_score` and :func:`~evalcore.judging.judge.parse_generated`), and
has no ``outcomes`` or ``score``. FastChat's ``judge_prompts.jsonl`` is read into such protocols by
:mod:`evalcore.judging.fastchat`.
``turns`` is 1 when absent, and a one-turn protocol's hash and ``as_dict()`` do not mention it (so
the hashes of protocols written before it existed, and the judgments cached under them, stand).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalcore.boundary.validation import yaml_problem

MAX_PROTOCOL_BYTES = 256 * 1024
KINDS = ("pairwise", "single")
WINNERS = ("A", "B", "tie")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
REQUIRED = {"pairwise": ("question", "answer_a", "answer_b"), "single": ("question", "answer")}
OPTIONAL = ("reference",)
REQUIRED_TWO_TURN = ("question_1", "answer_1", "question_2", "answer_2")
REQUIRED_PAIR_TWO_TURN = ("question_1", "question_2", "answer_a_1", "answer_a_2", "answer_b_1", "answer_b_2")
OPTIONAL_TWO_TURN = ("reference_1", "reference_2")
# How a generated verdict is read: Podium's rule (the default), or FastChat llm_judge's (see parse_generated)
PARSERS = ("podium", "fastchat")
FASTCHAT_FORMATS = {"single": ("[[rating]]",), "pairwise": ("[[A]]", "[[rating_a,rating_b]]")}
TURNS = (1, 2)
TOP_KEYS = {"name", "kind", "system", "user", "verdict", "source", "description", "turns"}
BUNDLED_DIR = Path(__file__).resolve().parent / "protocols"


@dataclass(frozen=True)
class Outcome:
    """A generated-verdict pattern: the literal ``pattern`` means ``winner`` with ``weight``."""

    pattern: str
    winner: str
    weight: float = 1.0


@dataclass(frozen=True)
class Verdict:
    """How the verdict is read.

    ``method == "logprob"``: ``prefix`` and ``tokens`` (``(("A", str), ("B", str))``) (pairwise), or
    ``prefix``, ``scale`` and ``suffix`` (single: the expected rating, see the module docs);
    ``method == "generate"``: ``max_new_tokens`` and ``outcomes`` (pairwise) or ``score_regex``,
    ``score_min``, ``score_max`` (single).
    """

    method: str
    prefix: str = ""
    tokens: tuple[tuple[str, str], ...] = ()
    max_new_tokens: int = 0
    outcomes: tuple[Outcome, ...] = ()
    score_regex: str = ""
    score_min: float = 1.0
    score_max: float = 10.0
    scale: tuple[int | float, ...] = ()  # single-answer log-prob grading: the ratings, as written
    suffix: str = ""  # ... and what follows each rating in its scored continuation
    parse: str = "podium"  # generated verdicts: Podium's rule, or "fastchat" (FastChat llm_judge's)
    output_format: str = ""  # parse fastchat: "[[rating]]", "[[A]]" or "[[rating_a,rating_b]]"

    @property
    def fastchat(self) -> bool:
        """A generated verdict read by FastChat llm_judge's rules (see :func:`evalcore.judging.judge.parse_score`)."""
        return self.method == "generate" and self.parse == "fastchat"

    @property
    def graded_by_logprob(self) -> bool:
        """A single-answer verdict read from the ratings' probabilities (not parsed from text)."""
        return self.method == "logprob" and bool(self.scale)

    @property
    def continuations(self) -> tuple[str, ...]:
        """Each rating's scored continuation (``"10]]"``), in scale order."""
        return tuple(rating_text(r) + self.suffix for r in self.scale)

    def as_dict(self) -> dict:
        if self.graded_by_logprob:
            return {"method": "logprob", "prefix": self.prefix, "scale": list(self.scale), "suffix": self.suffix,
                    "score": "expected rating, continuation log-likelihoods normalised over the scale"}
        if self.method == "logprob":
            return {"method": "logprob", "prefix": self.prefix, "tokens": dict(self.tokens)}
        out: dict = {"method": "generate", "max_new_tokens": self.max_new_tokens}
        if self.fastchat:  # the keys a Podium-parsed verdict has are absent, so its hash is unchanged
            return {**out, "parse": "fastchat", "output_format": self.output_format}
        if self.outcomes:
            out["outcomes"] = [{"pattern": o.pattern, "winner": o.winner, "weight": o.weight} for o in self.outcomes]
        else:
            out["score"] = {"regex": self.score_regex, "min": self.score_min, "max": self.score_max}
        return out


@dataclass(frozen=True)
class JudgeProtocol:
    """A validated judge protocol (see the module docs). ``sha256`` covers everything that changes a
    judgment (kind, turns, system, user, verdict), not the name, source or description."""

    name: str
    kind: str
    user: str
    verdict: Verdict
    system: str | None = None
    source: str = ""
    description: str = ""
    turns: int = 1

    @property
    def reference_placeholders(self) -> tuple[str, ...]:
        """The reference placeholders the templates use (``("reference",)``, or some of
        ``("reference_1", "reference_2")`` for a two-turn protocol)."""
        names = OPTIONAL if self.turns == 1 else OPTIONAL_TWO_TURN
        found = set(PLACEHOLDER.findall(self.user)) | set(PLACEHOLDER.findall(self.system or ""))
        return tuple(n for n in names if n in found)

    @property
    def uses_reference(self) -> bool:
        return bool(self.reference_placeholders)

    def as_dict(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "system": self.system, "user": self.user}
        if self.turns != 1:  # absent for one turn: the dicts (and hashes) of older protocols are unchanged
            out["turns"] = self.turns
        out["verdict"] = self.verdict.as_dict()
        out.update(source=self.source, description=self.description)
        return out

    @property
    def sha256(self) -> str:
        hashed = ("kind", "turns", "system", "user", "verdict")
        content = {k: v for k, v in self.as_dict().items() if k in hashed}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def messages(self, *, question: str, answer_a: str = "", answer_b: str = "", answer: str = "",
                 reference: str | None = None) -> list[dict]:
        """The judge conversation, ``[system (if any), user]``, with the placeholders filled in one
        pass (so text inside an answer that looks like a placeholder is left alone)."""
        values = {"question": question, "answer_a": answer_a, "answer_b": answer_b, "answer": answer,
                  "reference": reference if reference is not None else ""}
        if self.turns != 1:
            raise ValueError(f"protocol {self.name!r} grades two turns: build its prompt with conversation_messages")
        if self.uses_reference and reference is None:
            raise ValueError(f"protocol {self.name!r} is reference-guided: every item needs a reference")
        return self._render(values)

    def conversation_messages(self, *, questions: Sequence[str], answers: Sequence[str],
                              references: Sequence[str] | None = None) -> list[dict]:
        """The judge conversation grading the last answer of a conversation: ``questions`` and
        ``answers`` hold one entry per turn (as many as the protocol's ``turns``), ``references`` one
        reference answer per turn (needed when the protocol is reference-guided, else ignored)."""
        if len(questions) != self.turns or len(answers) != self.turns:
            raise ValueError(
                f"protocol {self.name!r} grades {self.turns} turn(s); got {len(questions)} question(s) "
                f"and {len(answers)} answer(s)"
            )
        if self.uses_reference and (references is None or len(references) != self.turns):
            raise ValueError(f"protocol {self.name!r} is reference-guided: it needs a reference answer per turn")
        refs = list(references) if references is not None and len(references) == self.turns else None
        if self.turns == 1:
            return self.messages(question=questions[0], answer=answers[0], reference=refs[0] if refs else None)
        values = {"question_1": questions[0], "answer_1": answers[0], "question_2": questions[1],
                  "answer_2": answers[1], "reference_1": refs[0] if refs else "", "reference_2": refs[1] if refs else ""}
        return self._render(values)

    def pair_messages(self, *, questions: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str],
                      references: Sequence[str] | None = None) -> list[dict]:  # fmt: skip
        """The judge conversation comparing two answers: for a one-turn protocol, the one question and
        its two answers (as :meth:`messages`); for a two-turn protocol, both conversations (the judge
        compares the answers to the second question). Each sequence holds one entry per turn."""
        if self.kind != "pairwise":
            raise ValueError(f"protocol {self.name!r} grades single answers, not pairs")
        if not len(questions) == len(answers_a) == len(answers_b) == self.turns:
            raise ValueError(
                f"protocol {self.name!r} compares {self.turns} turn(s); got {len(questions)} question(s) and "
                f"{len(answers_a)} and {len(answers_b)} answer(s)"
            )
        if self.uses_reference and (references is None or len(references) != self.turns):
            raise ValueError(f"protocol {self.name!r} is reference-guided: it needs a reference answer per turn")
        refs = list(references) if self.uses_reference else None
        if self.turns == 1:
            return self.messages(question=questions[0], answer_a=answers_a[0], answer_b=answers_b[0],
                                 reference=refs[0] if refs else None)  # fmt: skip
        values = {"question_1": questions[0], "question_2": questions[1], "answer_a_1": answers_a[0],
                  "answer_a_2": answers_a[1], "answer_b_1": answers_b[0], "answer_b_2": answers_b[1],
                  "reference_1": refs[0] if refs else "", "reference_2": refs[1] if refs else ""}  # fmt: skip
        return self._render(values)

    def _render(self, values: dict[str, str]) -> list[dict]:
        """Fill the placeholders in one pass (validation guarantees every one is in ``values``)."""

        def fill(template: str) -> str:
            return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

        out = [{"role": "system", "content": fill(self.system)}] if self.system else []
        return [*out, {"role": "user", "content": fill(self.user)}]

    def verdict_token_ids(self, tokenizer) -> tuple[int, int]:
        """The first token id of each verdict string (``encode(s, add_special_tokens=False)[0]``),
        ``(id_A, id_B)``; refuses strings that encode to nothing or to the same first id."""
        if self.verdict.method != "logprob":
            raise ValueError(f"protocol {self.name!r} reads a generated verdict, not token log-probabilities")
        if self.verdict.graded_by_logprob:
            raise ValueError(f"protocol {self.name!r} grades on a scale: its ratings are scored as continuations")
        ids = {}
        for label, text in self.verdict.tokens:
            encoded = tokenizer.encode(text, add_special_tokens=False)
            if not encoded:
                raise ValueError(f"protocol {self.name!r}: verdict string {text!r} encodes to no token")
            ids[label] = int(encoded[0])
        if ids["A"] == ids["B"]:
            strings = dict(self.verdict.tokens)
            raise ValueError(
                f"protocol {self.name!r}: verdict strings {strings['A']!r} and {strings['B']!r} share the first "
                f"token id {ids['A']}, so their probabilities cannot be told apart"
            )
        return ids["A"], ids["B"]


def check_family(family, roles: Sequence[tuple[str, int, bool]], *, kind: str, what: str, missing: str,
                 verb: str) -> None:  # fmt: skip
    """Validate a protocol family dataclass (grading or pairwise) in place: each ``(role, turns,
    guided)`` member is None (except the first, whose absence raises ``missing``) or a ``kind``
    protocol of that many turns, with a reference placeholder exactly when ``guided``; the
    ``reference_categories`` become a tuple of strings. ValueError names the role at fault."""
    for index, (role, turns, guided) in enumerate(roles):
        protocol = getattr(family, role)
        if protocol is None:
            if index == 0:
                raise ValueError(missing)
            continue
        if not isinstance(protocol, JudgeProtocol) or protocol.kind != kind:
            raise ValueError(f"{role}: a {what} family holds {'single-answer' if kind == 'single' else kind} protocols")
        if protocol.turns != turns:
            raise ValueError(f"{role}: protocol {protocol.name!r} {verb} {protocol.turns} turn(s), this role {turns}")
        if protocol.uses_reference != guided:
            needs = "needs a reference placeholder" if guided else "must not need a reference"
            raise ValueError(f"{role}: protocol {protocol.name!r} {needs}")
    categories = family.reference_categories
    if isinstance(categories, str) or not all(isinstance(c, str) for c in categories):
        raise ValueError("reference_categories must be a tuple of category names")
    object.__setattr__(family, "reference_categories", tuple(categories))  # a list given: still hashable


def bundled_protocols() -> dict[str, Path]:
    """Name (file stem) -> path of every protocol shipped with evalcore."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*.yaml"))}


def load_protocol(source: str | Path, *, tokenizer=None) -> JudgeProtocol:
    """Read and validate a protocol from a YAML file, or a bundled one by name.

    Parameters
    ----------
    source : str or Path
        A file path, or the name of a bundled protocol (see :func:`bundled_protocols`).
    tokenizer : optional
        The judge's tokenizer; when given, log-prob verdict strings are checked against it.
    """
    bundled = bundled_protocols()
    path = bundled[str(source)] if str(source) in bundled and not Path(source).exists() else Path(source)
    if not path.is_file():
        raise ValueError(f"protocol {str(source)!r} is neither a file nor a bundled protocol ({', '.join(bundled)})")
    if path.stat().st_size > MAX_PROTOCOL_BYTES:
        raise ValueError(f"protocol file {str(path)!r} is larger than {MAX_PROTOCOL_BYTES} bytes")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"protocol file {str(path)!r} is not valid YAML: {yaml_problem(exc)}") from None
    protocol = protocol_from_dict(data, where=str(path))
    if tokenizer is not None and protocol.verdict.method == "logprob" and not protocol.verdict.graded_by_logprob:
        protocol.verdict_token_ids(tokenizer)
    return protocol


def protocol_from_dict(data, *, where: str = "protocol") -> JudgeProtocol:
    """Validate a parsed protocol mapping (see the module docs); ``where`` prefixes error messages."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a protocol must be a mapping with name, kind, user and verdict")
    unknown = sorted(set(map(str, data)) - TOP_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(TOP_KEYS))}")
    for key in ("name", "kind", "user", "verdict"):
        if key not in data:
            raise ValueError(f"{where}: missing key {key!r}")
    for key in ("name", "user", "system", "source", "description"):
        if key in data and (data[key] is not None or key in ("name", "user")) and not isinstance(data[key], str):
            raise ValueError(f"{where}: {key!r} must be a string")
    kind = data["kind"]
    if kind not in KINDS:
        raise ValueError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    turns = data.get("turns", 1)
    if not isinstance(turns, int) or isinstance(turns, bool) or turns not in TURNS:
        raise ValueError(f"{where}: turns must be 1 or 2, got {turns!r}")
    system = data.get("system") or None
    check_placeholders(data["user"], system, kind=kind, where=where, turns=turns)
    verdict = parse_verdict(data["verdict"], kind=kind, where=where)
    return JudgeProtocol(name=data["name"], kind=kind, user=data["user"], verdict=verdict, system=system,
                         source=data.get("source") or "", description=data.get("description") or "", turns=turns)


def required_placeholders(kind: str, turns: int) -> tuple[str, ...]:
    """The placeholders a protocol's user template must hold."""
    if turns == 1:
        return REQUIRED[kind]
    return REQUIRED_TWO_TURN if kind == "single" else REQUIRED_PAIR_TWO_TURN


def check_placeholders(user: str, system: str | None, *, kind: str, where: str, turns: int = 1) -> None:
    """Refuse a template missing a required placeholder, or naming an unknown or foreign one."""
    required = required_placeholders(kind, turns)
    allowed = set(required) | set(OPTIONAL if turns == 1 else OPTIONAL_TWO_TURN)
    what = f"{kind} protocol" if turns == 1 else f"two-turn {kind} protocol"
    for name, template in (("user", user), ("system", system or "")):
        for found in PLACEHOLDER.findall(template):
            if found not in allowed:
                raise ValueError(
                    f"{where}: {name} template has placeholder {{{found}}}, not allowed in a {what} "
                    f"(allowed: {', '.join('{' + a + '}' for a in sorted(allowed))})"
                )
    present = set(PLACEHOLDER.findall(user))
    for name in required:
        if name not in present:
            raise ValueError(f"{where}: user template is missing the placeholder {{{name}}}")


def parse_verdict(data, *, kind: str, where: str) -> Verdict:
    """Validate the ``verdict`` mapping."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: verdict must be a mapping with a method")
    method = data.get("method")
    if method == "logprob" and kind == "single":
        return _logprob_scale_verdict(data, where)
    if method == "logprob":
        _only_keys(data, {"method", "prefix", "tokens"}, f"{where}: verdict")
        prefix, tokens = data.get("prefix", ""), data.get("tokens")
        if not isinstance(prefix, str):
            raise ValueError(f"{where}: verdict prefix must be a string")
        if not isinstance(tokens, dict) or set(map(str, tokens)) != {"A", "B"}:
            raise ValueError(f"{where}: verdict tokens must be a mapping with exactly the keys A and B")
        if not all(isinstance(v, str) and v for v in tokens.values()):
            raise ValueError(f"{where}: verdict tokens must be non-empty strings")
        if tokens["A"] == tokens["B"]:
            raise ValueError(f"{where}: verdict tokens A and B are the same string {tokens['A']!r}")
        return Verdict(method="logprob", prefix=prefix, tokens=(("A", tokens["A"]), ("B", tokens["B"])))
    if method != "generate":
        raise ValueError(f"{where}: verdict method {method!r} is not logprob or generate")
    parse = data.get("parse", "podium")
    if parse not in PARSERS:
        raise ValueError(f"{where}: verdict parse {parse!r} is not one of {', '.join(PARSERS)}")
    if parse == "fastchat":
        _only_keys(data, {"method", "max_new_tokens", "parse", "output_format"}, f"{where}: verdict (parse fastchat)")
    else:
        _only_keys(data, {"method", "max_new_tokens", "outcomes", "score", "parse"}, f"{where}: verdict")
    max_new = data.get("max_new_tokens")
    if not isinstance(max_new, int) or isinstance(max_new, bool) or not 1 <= max_new <= 8192:
        raise ValueError(f"{where}: verdict max_new_tokens must be an integer from 1 to 8192")
    if parse == "fastchat":
        output_format = data.get("output_format")
        if output_format not in FASTCHAT_FORMATS[kind]:
            raise ValueError(f"{where}: a {kind} verdict parsed as FastChat's needs output_format "
                             f"{' or '.join(repr(f) for f in FASTCHAT_FORMATS[kind])}, got {output_format!r}")  # fmt: skip
        return Verdict(method="generate", max_new_tokens=max_new, parse="fastchat", output_format=output_format)
    if kind == "pairwise":
        if "score" in data:
            raise ValueError(f"{where}: a pairwise verdict has outcomes, not a score")
        return Verdict(method="generate", max_new_tokens=max_new, outcomes=_outcomes(data.get("outcomes"), where))
    if "outcomes" in data:
        raise ValueError(f"{where}: a single-answer verdict has a score, not outcomes")
    score = data.get("score")
    if not isinstance(score, dict):
        raise ValueError(f"{where}: a single-answer verdict needs score: {{regex, min, max}}")
    _only_keys(score, {"regex", "min", "max"}, f"{where}: verdict score")
    regex = score.get("regex")
    try:
        groups = re.compile(regex).groups if isinstance(regex, str) else 0
    except re.error as exc:
        raise ValueError(f"{where}: verdict score regex does not compile: {exc}") from None
    if groups != 1:
        raise ValueError(f"{where}: verdict score regex must be a string with exactly one group (the score)")
    low, high = score.get("min", 1), score.get("max", 10)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and -1e6 <= v <= 1e6 for v in (low, high)) \
            or not low < high:
        raise ValueError(f"{where}: verdict score min and max must be numbers from -1e6 to 1e6 with min < max")
    return Verdict(method="generate", max_new_tokens=max_new, score_regex=regex,
                   score_min=float(low), score_max=float(high))


MAX_SCALE = 100


def rating_text(rating: int | float) -> str:
    """How a rating is written in its continuation: ``7`` for 7 and 7.0, ``7.5`` for 7.5."""
    if isinstance(rating, float) and rating.is_integer():
        return str(int(rating))
    return str(rating) if isinstance(rating, int) else repr(float(rating))


def _logprob_scale_verdict(data: dict, where: str) -> Verdict:
    """A single-answer log-prob verdict: ``prefix``, ``scale`` and optional ``suffix``."""
    if "tokens" in data:
        raise ValueError(f"{where}: verdict method logprob needs kind pairwise for A/B tokens; a single-answer "
                         "log-prob verdict has prefix, scale and suffix")  # fmt: skip
    _only_keys(data, {"method", "prefix", "scale", "suffix"}, f"{where}: verdict")
    prefix, scale, suffix = data.get("prefix"), data.get("scale"), data.get("suffix", "")
    if not isinstance(prefix, str) or not prefix.strip():
        raise ValueError(f"{where}: a log-prob grading verdict needs a non-empty prefix (the text the ratings "
                         "follow, e.g. 'Rating: [[')")  # fmt: skip
    if not isinstance(suffix, str):
        raise ValueError(f"{where}: verdict suffix must be a string (e.g. ']]')")
    if not isinstance(scale, list) or not 2 <= len(scale) <= MAX_SCALE:
        raise ValueError(f"{where}: verdict scale must be a list of 2 to {MAX_SCALE} numeric ratings, e.g. [1, 2, 3]")
    for rating in scale:
        if not isinstance(rating, int | float) or isinstance(rating, bool) or not -1e6 <= rating <= 1e6:
            raise ValueError(f"{where}: verdict scale rating {rating!r} is not a number from -1e6 to 1e6")
    texts = [rating_text(r) for r in scale]
    if len(set(texts)) != len(texts):
        raise ValueError(f"{where}: verdict scale lists a rating twice")
    continuations = [t + suffix for t in texts]
    for a in continuations:
        for b in continuations:
            if a != b and b.startswith(a):
                raise ValueError(f"{where}: rating continuation {a!r} is the start of {b!r}, so their probabilities "
                                 "overlap; give a suffix that ends every rating (e.g. ']]')")  # fmt: skip
    return Verdict(method="logprob", prefix=prefix, scale=tuple(scale), suffix=suffix,
                   score_min=float(min(scale)), score_max=float(max(scale)))


def _outcomes(items, where: str) -> tuple[Outcome, ...]:
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: verdict outcomes must be a non-empty list of {{pattern, winner, weight}}")
    out, seen = [], set()
    for index, item in enumerate(items):
        label = f"{where}: verdict outcome {index + 1}"
        if not isinstance(item, dict):
            raise ValueError(f"{label} must be a mapping with pattern and winner")
        _only_keys(item, {"pattern", "winner", "weight"}, label)
        pattern, winner, weight = item.get("pattern"), item.get("winner"), item.get("weight", 1)
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{label}: pattern must be a non-empty string")
        if pattern in seen:
            raise ValueError(f"{label}: pattern {pattern!r} is listed twice")
        if any(pattern in other or other in pattern for other in seen):
            raise ValueError(f"{label}: pattern {pattern!r} contains (or is contained in) another pattern")
        if winner not in WINNERS:
            raise ValueError(f"{label}: winner {winner!r} is not one of {', '.join(WINNERS)}")
        if not isinstance(weight, int | float) or isinstance(weight, bool) or not 0 < weight <= 100:
            raise ValueError(f"{label}: weight must be a number in (0, 100]")
        seen.add(pattern)
        out.append(Outcome(pattern=pattern, winner=winner, weight=float(weight)))
    if not {"A", "B"} <= {o.winner for o in out}:
        raise ValueError(f"{where}: verdict outcomes must include a pattern for A and one for B")
    return tuple(out)


def _only_keys(data: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
