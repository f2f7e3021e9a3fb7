"""Benchmark prompts as chat conversations, and the decoding settings a run may override.

A document's prompt is built as lm-evaluation-harness 0.4.13 builds it (``Task.fewshot_context``):

- a **system** turn holding ``--system-instruction`` and the task's ``description``, joined by the
  task's ``fewshot_delimiter`` (when one of them is given);
- per few-shot example a **user** turn (the question; its text ends with the target delimiter) and
  an **assistant** turn (the answer, after ``gen_prefix`` when the task has one; its text ends with the
  few-shot delimiter);
- the evaluated document's **user** turn, then an **assistant** turn holding ``gen_prefix`` if any.

As plain text the turns are joined with their delimiters (the prompt without a chat template: the
same text as :meth:`evalcore.engine.prompts.Prompter.context`, with the system instruction first).
As chat messages the few-shot turns are either collapsed into **one user message** (the default;
the system turn and a trailing ``gen_prefix`` turn stay apart) or kept as **alternating turns**
(``fewshot_as_multiturn``, the delimiters dropped), exactly as the harness does.

Decoding overrides (``--gen-kwargs``) are checked by :func:`parse_gen_kwargs` and merged over each
generation task's ``generation_kwargs`` by :func:`effective_generation_kwargs`;
:func:`decoding_settings` gives the settings every request carries, with where each came from.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from evalcore.engine.prompts import Prompter
from evalcore.models import parse_model_args


@dataclass(frozen=True)
class ChatOptions:
    """How a run turns documents into conversations (recorded in every task's protocol)."""

    apply_chat_template: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool = False

    def __post_init__(self) -> None:
        if self.system_instruction is not None and not isinstance(self.system_instruction, str):
            raise ValueError("system_instruction must be a string")
        if self.fewshot_as_multiturn and not self.apply_chat_template:
            raise ValueError(
                "--fewshot-as-multiturn needs the chat template (--apply-chat-template, or a chat backend "
                "such as openai-chat): without it there are no turns to alternate"
            )

    @property
    def plain(self) -> bool:
        """Nothing to change: the prompt is the task's text as it always was."""
        return not self.apply_chat_template and not self.system_instruction


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    delimiter: str = ""  # appended when the conversation is written as plain text


def _needs_delimiter(before: str, after: str) -> bool:
    return bool(before) and bool(after) and not (before[-1].isspace() or after[0].isspace())


def _joined(prefix: str | None, suffix: str | None, delimiter: str) -> str:
    if not prefix:
        return suffix or ""
    if not suffix:
        return prefix
    return prefix + delimiter + suffix if _needs_delimiter(prefix, suffix) else prefix + suffix


def _qa_turns(question: str, answer: str | None, gen_prefix: str | None, target_delimiter: str,
              fewshot_delimiter: str) -> list[Turn]:  # fmt: skip
    has_answer = answer is not None and answer != ""
    if has_answer and not gen_prefix:
        user_delimiter = target_delimiter
    else:
        user_delimiter = target_delimiter if gen_prefix and _needs_delimiter(question, gen_prefix) else ""
    turns = [Turn("user", question, user_delimiter)]
    if has_answer:
        turns.append(Turn("assistant", _joined(gen_prefix, answer, " "), fewshot_delimiter))
    elif gen_prefix:
        turns.append(Turn("assistant", gen_prefix))
    return turns


def conversation(prompter: Prompter, doc: dict, shots: list[dict], *, system_instruction: str | None,
                 text: str | None = None) -> list[Turn]:  # fmt: skip
    """The turns of one document's prompt; ``text`` replaces the document's text (one input of a
    multiple-input task, whose turn then has no target delimiter, as in the harness)."""
    turns = []
    system = _joined(system_instruction, prompter.description(doc), prompter.main.fewshot_delimiter)
    if system:
        turns.append(Turn("system", system))
    spec = prompter.fewshot
    for shot in shots:
        turns += _qa_turns(prompter.question(shot, spec), prompter.answer_text(shot, spec),
                           prompter.prefix(shot, spec), spec.target_delimiter, spec.fewshot_delimiter)  # fmt: skip
    gen_prefix = prompter.prefix(doc)
    if text is not None:
        return turns + _qa_turns(text, None, gen_prefix, "", "")
    question = prompter.text(doc)
    if not isinstance(question, str):
        raise ValueError(f"task {prompter.task!r}: doc_to_text gave {question!r}, not a string")
    return turns + _qa_turns(question, None, gen_prefix, prompter.main.target_delimiter, "")


def as_text(turns: list[Turn]) -> str:
    """The conversation as one plain prompt (no chat template)."""
    return "".join(turn.content + turn.delimiter for turn in turns)


def as_messages(turns: list[Turn], *, multiturn: bool) -> list[dict]:
    """OpenAI-style messages: alternating turns, or the few-shot turns collapsed into one user message."""
    if multiturn:
        return [{"role": t.role, "content": t.content} for t in turns]
    system = [turns[0]] if turns and turns[0].role == "system" else []
    rest = turns[len(system) :]
    tail = [rest.pop()] if rest and rest[-1].role == "assistant" else []
    body = "".join(t.content + t.delimiter for t in rest[:-1]) + rest[-1].content
    messages = [{"role": "system", "content": t.content} for t in system] + [
        {"role": "user", "content": body}
    ]
    return messages + [{"role": "assistant", "content": t.content} for t in tail]


# -- decoding overrides --------------------------------------------------------------------------------
GEN_KWARGS = ("temperature", "top_p", "max_gen_toks", "until", "do_sample")
GEN_KWARGS_ALIASES = {"max_tokens": "max_gen_toks", "max_new_tokens": "max_gen_toks", "stop": "until"}
MAX_GEN_TOKS = 1_000_000
MAX_STOPS = 16


def parse_gen_kwargs(value) -> dict:
    """``--gen-kwargs``: ``"temperature=0.7,top_p=0.9,max_gen_toks=64"`` or a JSON object (for stop
    lists and newlines: ``'{"until": ["\\n\\n", "Q:"]}'``) or a dict; checked, with aliases
    (``max_tokens``, ``max_new_tokens``, ``stop``) mapped to the harness's names.

    A positive temperature without ``do_sample`` turns sampling on; ``temperature=0`` turns it off.
    """
    if value is None or value == "" or value == {}:
        return {}
    if isinstance(value, str):
        raw = _parse_text(value.strip())
    elif isinstance(value, dict):
        raw = dict(value)
    else:
        raise ValueError(f"--gen-kwargs must be key=value pairs or a JSON object, got {type(value).__name__}")
    checked: dict = {}
    for key, item in raw.items():
        name = GEN_KWARGS_ALIASES.get(key, key)
        if name not in GEN_KWARGS:
            allowed = ", ".join(GEN_KWARGS + tuple(GEN_KWARGS_ALIASES))
            raise ValueError(f"--gen-kwargs: unknown key {key!r}; allowed: {allowed}")
        if name in checked:
            raise ValueError(f"--gen-kwargs: {name!r} given twice ({key!r} is another name for it)")
        checked[name] = _checked(name, item)
    if "temperature" in checked and "do_sample" not in checked:
        checked["do_sample"] = checked["temperature"] > 0
    if checked.get("do_sample") and checked.get("temperature", 1.0) == 0:
        raise ValueError(
            "--gen-kwargs: do_sample=true with temperature=0 is contradictory; give a temperature > 0"
        )
    return checked


def _parse_text(text: str) -> dict:
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--gen-kwargs is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError('--gen-kwargs JSON must be an object such as {"temperature": 0.7}')
        return value
    try:  # the same key=value rules as --model-args
        return parse_model_args(text)
    except ValueError as exc:
        raise ValueError(
            f"--gen-kwargs: {str(exc).replace('model argument', 'generation setting')}"
        ) from None


def _checked(name: str, value):
    if name == "do_sample":
        if not isinstance(value, bool):
            raise ValueError(f"--gen-kwargs: do_sample must be true or false, got {value!r}")
        return value
    if name == "until":
        stops = [value] if isinstance(value, str) else value
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise ValueError(
                f"--gen-kwargs: until/stop must be a non-empty string or a list of them, got {value!r}"
            )
        if len(stops) > MAX_STOPS:
            raise ValueError(f"--gen-kwargs: at most {MAX_STOPS} stop strings, got {len(stops)}")
        return stops
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"--gen-kwargs: {name} must be a number, got {value!r}")
    if name == "max_gen_toks":
        if not isinstance(value, int) or not 1 <= value <= MAX_GEN_TOKS:
            raise ValueError(
                f"--gen-kwargs: max_gen_toks must be a whole number from 1 to {MAX_GEN_TOKS}, got {value!r}"
            )
        return value
    value = float(value)
    if name == "temperature" and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"--gen-kwargs: temperature must be a finite number >= 0, got {value!r}")
    if name == "top_p" and not 0 < value <= 1:
        raise ValueError(f"--gen-kwargs: top_p must be in (0, 1], got {value!r}")
    return value


DECODING_DEFAULTS = {"max_gen_toks": 256, "do_sample": False, "temperature": 0.0, "top_p": 1.0}
DECODING_KEYS = ("until", "max_gen_toks", "do_sample", "temperature", "top_p")


def decoding_settings(task_kwargs: dict, overrides: dict, fewshot_delimiter: str = "\n\n") -> tuple[dict, dict, dict]:
    """The decoding settings a generation task's requests carry: ``(settings, sources, ignored)``.

    ``settings`` has every field of :class:`~evalcore.models.base.GenerationRequest` that shapes
    decoding (``until``, ``max_gen_toks``, ``do_sample``, ``temperature``, ``top_p``), exactly as
    sent; ``sources`` says where each came from: ``"cli"`` (``--gen-kwargs``), ``"task"`` (the
    YAML's ``generation_kwargs``) or ``"default"`` (the engine's; ``until`` defaults to the task's
    few-shot delimiter, and ``do_sample`` is off whatever was asked when the temperature is 0).
    ``ignored`` holds the task's generation settings that no backend is given (``top_k``,
    ``num_beams``).
    """
    merged = effective_generation_kwargs(task_kwargs, overrides)
    if "max_gen_toks" not in merged and "max_new_tokens" in merged:
        merged["max_gen_toks"] = merged.pop("max_new_tokens")
    merged.pop("max_new_tokens", None)

    def source(key: str) -> str:
        if key in overrides:
            return "cli"
        if key in task_kwargs or (key == "max_gen_toks" and "max_new_tokens" in task_kwargs):
            return "task"
        return "default"

    until = merged.get("until", [fewshot_delimiter])
    temperature = float(merged.get("temperature", DECODING_DEFAULTS["temperature"]))
    settings = {
        "until": [until] if isinstance(until, str) else list(until),
        "max_gen_toks": int(merged.get("max_gen_toks", DECODING_DEFAULTS["max_gen_toks"])),
        "do_sample": bool(merged.get("do_sample", False)) and temperature > 0,
        "temperature": temperature,
        "top_p": float(merged.get("top_p", DECODING_DEFAULTS["top_p"])),
    }
    sources = {key: source(key) for key in DECODING_KEYS}
    if settings["do_sample"] != bool(merged.get("do_sample", False)):
        sources["do_sample"] = "default"  # asked for, but a temperature of 0 decodes greedily
    ignored = {k: v for k, v in merged.items() if k not in DECODING_KEYS}
    return settings, sources, ignored


def effective_generation_kwargs(task_kwargs: dict, overrides: dict) -> dict:
    """A generation task's settings with ``overrides`` (from :func:`parse_gen_kwargs`) on top; the
    harness's other spellings in the task file give way to the override's name."""
    merged = dict(task_kwargs)
    if "max_gen_toks" in overrides:
        merged.pop("max_new_tokens", None)
    merged.update(overrides)
    return merged
