"""Prompts from documents: ``doc_to_text``, ``doc_to_target``, ``doc_to_choice`` and few-shot.

The rules are the harness's: a string naming a document field returns that field; any other
string is a Jinja2 template (undefined names are an error); a rendered target made of digits is
an index when the task has choices; a rendered choice list is parsed as a Python literal. The
few-shot context is ``description + sum(text + target_delimiter + answer + fewshot_delimiter) +
text``; the seeded sampler draws with one ``random.Random(seed)`` per task, in document order
(so the same documents get the same examples as in the harness).
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

import jinja2

from evalcore.engine.config import TaskConfig


def _regex_replace(text: str, pattern: str, replacement: str = "") -> str:
    return re.sub(pattern, replacement, text)


ENV = jinja2.Environment(loader=jinja2.BaseLoader(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
ENV.filters["regex_replace"] = _regex_replace
_TEMPLATES: dict[str, jinja2.Template] = {}


class TemplateError(ValueError):
    """A template could not be rendered for a document (e.g. a missing field)."""


def render(template: str, doc: dict, *, task: str = "", what: str = "template") -> str:
    compiled = _TEMPLATES.get(template)
    if compiled is None:
        try:
            compiled = ENV.from_string(template)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"task {task!r}: {what} {template!r} is not a valid Jinja2 template: {exc}") from None
        _TEMPLATES[template] = compiled
    try:
        return compiled.render(**doc)
    except jinja2.UndefinedError as exc:
        fields = sorted(doc)
        raise TemplateError(f"task {task!r}: {what} {template!r} failed: {exc.message}; document fields are {fields}") from None
    except Exception as exc:  # noqa: BLE001 - any template runtime error is the user's to fix
        raise TemplateError(f"task {task!r}: {what} {template!r} failed: {exc}") from None


@dataclass(frozen=True)
class PromptSpec:
    """The templates used to turn documents into prompts (the task's, or few-shot overrides)."""

    doc_to_text: object
    doc_to_target: object
    doc_to_choice: object
    target_delimiter: str
    fewshot_delimiter: str
    gen_prefix: object = None


class Prompter:
    """Renders a task's documents into prompts and targets."""

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.task = config.task
        self.main = PromptSpec(
            doc_to_text=config.get("doc_to_text"),
            doc_to_target=config.get("doc_to_target"),
            doc_to_choice=config.get("doc_to_choice"),
            target_delimiter=config.get("target_delimiter", " "),
            fewshot_delimiter=config.get("fewshot_delimiter", "\n\n"),
            gen_prefix=config.get("gen_prefix"),
        )
        fs = config.fewshot_config
        self.fewshot = PromptSpec(
            doc_to_text=fs.get("doc_to_text", self.main.doc_to_text),
            doc_to_target=fs.get("doc_to_target", self.main.doc_to_target),
            doc_to_choice=fs.get("doc_to_choice", self.main.doc_to_choice),
            target_delimiter=fs.get("target_delimiter", self.main.target_delimiter),
            fewshot_delimiter=fs.get("fewshot_delimiter", self.main.fewshot_delimiter),
            gen_prefix=fs.get("gen_prefix", self.main.gen_prefix),
        )
        self.has_choices = config.get("doc_to_choice") is not None

    # -- the three doc_to_* functions -------------------------------------------------------------
    def text(self, doc: dict, spec: PromptSpec | None = None):
        template = (spec or self.main).doc_to_text
        if isinstance(template, int):
            return template
        if callable(template):
            return template(doc)
        if not isinstance(template, str):
            raise ValueError(f"task {self.task!r}: doc_to_text must be a field name or a template")
        if template in doc:
            return doc[template]
        text = render(template, doc, task=self.task, what="doc_to_text")
        if text.isdigit() and self.has_choices:
            return int(text)
        return text

    def target(self, doc: dict, spec: PromptSpec | None = None):
        template = (spec or self.main).doc_to_target
        if template is None:
            raise ValueError(f"task {self.task!r} needs doc_to_target")
        if isinstance(template, int | list):
            return template
        if callable(template):
            return template(doc)
        if not isinstance(template, str):
            raise ValueError(f"task {self.task!r}: doc_to_target must be a field name, an index or a template")
        if template in doc:
            return doc[template]
        text = render(template, doc, task=self.task, what="doc_to_target")
        if text.isdigit() and self.has_choices:
            return int(text)
        if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
            try:
                return ast.literal_eval(text)
            except (SyntaxError, ValueError):
                return text
        return text

    def choices(self, doc: dict, spec: PromptSpec | None = None) -> list[str]:
        template = (spec or self.main).doc_to_choice
        if isinstance(template, list):
            choices = template
        elif callable(template):
            choices = template(doc)
        elif isinstance(template, dict):
            choices = list(template.values())
        elif isinstance(template, str):
            if template in doc:
                choices = doc[template]
            else:
                rendered = render(template, doc, task=self.task, what="doc_to_choice")
                try:
                    choices = ast.literal_eval(rendered)
                except (SyntaxError, ValueError):
                    raise ValueError(f"task {self.task!r}: doc_to_choice rendered {rendered[:80]!r}, not a list") from None
        else:
            raise ValueError(f"task {self.task!r}: doc_to_choice must be a list, a field name or a template")
        if not isinstance(choices, list | tuple) or not choices:
            raise ValueError(f"task {self.task!r}: doc_to_choice gave {choices!r}, not a non-empty list")
        return [str(c) for c in choices]

    def answer_text(self, doc: dict, spec: PromptSpec) -> str:
        """The text shown after a few-shot example's question."""
        target = self.target(doc, spec)
        if isinstance(target, int) and spec.doc_to_choice is not None:
            choices = self.choices(doc, spec)
            if not 0 <= target < len(choices):
                raise ValueError(f"task {self.task!r}: target index {target} out of range for {len(choices)} choices")
            return choices[target]
        if isinstance(target, list):
            return str(target[0])
        return str(target)

    # -- the prompt -------------------------------------------------------------------------------
    def description(self, doc: dict) -> str:
        description = self.config.get("description") or ""
        if "{{" in description or "{%" in description:
            return render(description, doc, task=self.task, what="description")
        return description

    def prefix(self, doc: dict, spec: PromptSpec | None = None) -> str | None:
        """``gen_prefix``: text that starts the answer (a field name or a template)."""
        template = (spec or self.main).gen_prefix
        if template is None:
            return None
        if template in doc:
            return str(doc[template])
        return render(str(template), doc, task=self.task, what="gen_prefix")

    def question(self, doc: dict, spec: PromptSpec) -> str:
        """The document's text; for multiple-input tasks (an index into the choices) that choice."""
        text = self.text(doc, spec)
        if isinstance(text, int) and not isinstance(text, bool) and spec.doc_to_choice is not None:
            return self.choices(doc, spec)[text]
        if not isinstance(text, str):
            raise ValueError(f"task {self.task!r}: doc_to_text gave {text!r}, not a string")
        return text

    def shot_text(self, shot: dict) -> str:
        """A few-shot example: question, delimiter, answer (after gen_prefix), few-shot delimiter."""
        spec = self.fewshot
        question, prefix = self.question(shot, spec), self.prefix(shot, spec)
        if prefix:
            delimiter = spec.target_delimiter if _needs_space(question, prefix) else ""
            return f"{question}{delimiter}{_join(prefix, self.answer_text(shot, spec))}{spec.fewshot_delimiter}"
        return f"{question}{spec.target_delimiter}{self.answer_text(shot, spec)}{spec.fewshot_delimiter}"

    def query(self, text: str, doc: dict) -> str:
        """The evaluated document's turn: its text, then gen_prefix when the task has one."""
        prefix = self.prefix(doc)
        if not prefix:
            return text
        delimiter = self.main.target_delimiter if _needs_space(text, prefix) else ""
        return f"{text}{delimiter}{prefix}"

    def context(self, doc: dict, shots: list[dict], text: str | None = None) -> str:
        """``description + shots + text`` (``text``: the document's, or one input of a multiple-input task)."""
        parts = [self.description(doc)] + [self.shot_text(shot) for shot in shots]
        if text is None:
            text = self.text(doc)
            if not isinstance(text, str):
                raise ValueError(f"task {self.task!r}: doc_to_text gave {text!r}, not a string")
        parts.append(self.query(text, doc))
        return "".join(parts)

    def is_multiple_input(self, doc: dict) -> bool:
        """doc_to_text gives a choice index: each choice is a context, the target the continuation."""
        text = self.text(doc)
        return isinstance(text, int) and not isinstance(text, bool) and self.has_choices


def _needs_space(before: str, after: str) -> bool:
    return bool(before) and bool(after) and not (before[-1].isspace() or after[0].isspace())


def _join(prefix: str, answer: str) -> str:
    return f"{prefix} {answer}" if _needs_space(prefix, answer) else f"{prefix}{answer}"


class FewshotSampler:
    """Chooses few-shot examples: ``first_n`` (in split order) or seeded random (the default)."""

    def __init__(self, pool: list[dict], *, sampler: str, seed: int | None, same_split: bool) -> None:
        self.pool = pool
        self.sampler = sampler
        self.rng = random.Random(seed)
        self.same_split = same_split

    def sample(self, n: int, doc: dict) -> list[int]:
        """Indices into the pool of ``n`` examples for ``doc`` (never ``doc`` itself)."""
        if n == 0:
            return []
        if len(self.pool) < n + (1 if self.same_split else 0) and self.sampler != "first_n":
            raise ValueError(f"{n} few-shot examples requested but the few-shot split has {len(self.pool)}")
        indices = list(range(len(self.pool)))
        if self.sampler == "first_n":
            if self.same_split:
                indices = [i for i in indices if self.pool[i] != doc]
            if len(indices) < n:
                raise ValueError(f"{n} few-shot examples requested but the few-shot split has {len(indices)}")
            return indices[:n]
        if not self.same_split:
            return self.rng.sample(indices, n)
        drawn = [i for i in self.rng.sample(indices, n + 1) if self.pool[i] != doc][:n]
        if len(drawn) < n:
            remaining = [i for i in indices if self.pool[i] != doc]
            drawn = self.rng.sample(remaining, n)
        return drawn
