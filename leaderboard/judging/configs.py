"""What a judge config resolves to: its protocol, its instructions, and the models a worker loads.

Domain helpers below the services: no writes. Relative checkpoint paths live under
``PODIUM_MODELS_DIR``, as for the arena's models.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml
from django.conf import settings

import evalcore.models
from arena.models import LanguageModel
from evalcore.judging import JudgeProtocol, bundled_protocols, load_protocol
from evalcore.judging.fastchat import (
    fastchat_grading_family,
    fastchat_pairwise_family,
    looks_like_fastchat,
    read_fastchat_prompts,
)
from evalcore.judging.grading import GradingProtocols, family_of_one, load_grading_protocols
from evalcore.judging.protocol import protocol_from_dict
from evalcore.judging.questions import (
    SAMPLE_QUESTIONS,
    JudgeQuestion,
    questions_from_items,
    read_questions,
)
from leaderboard.models import JudgeConfig, Submission
from workers.runtime import pool

DEFAULT_INSTRUCTIONS_FILE = Path(__file__).resolve().parent / "data" / "llmbar-natural-12.json"
MAX_INSTRUCTIONS = 500
MAX_INSTRUCTION_CHARS = 20_000
MAX_PROTOCOL_CHARS = 50_000
BACKENDS = ("hf", "vllm", "openai")
SUBMISSION_KEY = "submission"
SAMPLE_NAME = "sample"  # questions_file: the bundled two-turn sample set
# a bundled single protocol -> its family
GRADING_FAMILIES = {"mt-bench-single": "mt-bench", "mt-bench-single-logprob": "mt-bench-logprob"}


def default_instructions(limit: int | None = None) -> list[str]:
    """The bundled instruction slice (real LLMBar instructions, MIT), first ``limit`` of them."""
    data = json.loads(DEFAULT_INSTRUCTIONS_FILE.read_text(encoding="utf-8"))
    return list(data["instructions"][:limit] if limit else data["instructions"])


def instructions_check(instructions) -> list[str]:
    """A list of 1..500 non-empty strings, each at most 20,000 characters; ValueError naming the item."""
    if not isinstance(instructions, list) or not instructions:
        raise ValueError("instructions must be a non-empty list of strings")
    if len(instructions) > MAX_INSTRUCTIONS:
        raise ValueError(f"at most {MAX_INSTRUCTIONS} instructions, got {len(instructions)}")
    for i, text in enumerate(instructions):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"instruction {i} must be a non-empty string")
        if len(text) > MAX_INSTRUCTION_CHARS:
            raise ValueError(f"instruction {i} is longer than {MAX_INSTRUCTION_CHARS} characters")
    return instructions


def instructions_sha256(instructions: list[str], max_new_tokens: int) -> str:
    """What keys stored answers: the instruction texts and the answer length limit."""
    payload = json.dumps({"instructions": instructions, "max_new_tokens": max_new_tokens}, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def fastchat_prompts_of(config: JudgeConfig) -> dict[str, JudgeProtocol] | None:
    """The FastChat prompts pasted as the config's protocol text (FastChat's ``judge_prompts.jsonl``
    lines), or None when the text is a YAML protocol or empty; ValueError naming the line at fault."""
    text = config.protocol_yaml
    if not text.strip() or not looks_like_fastchat(text):
        return None
    if len(text) > MAX_PROTOCOL_CHARS:
        raise ValueError(f"the protocol is longer than {MAX_PROTOCOL_CHARS} characters")
    return read_fastchat_prompts("FastChat prompts", text=text)


def _fastchat_protocol(config: JudgeConfig, prompts: dict[str, JudgeProtocol]) -> JudgeProtocol:
    """The prompt the config names in ``protocol_name``; with no name, FastChat's one-turn judge of the
    only kind the prompts hold (``single-v1`` for grading, ``pair-v2`` for pairs)."""
    name = config.protocol_name.strip()
    if name:
        if name not in prompts:
            raise ValueError(f"the pasted FastChat prompts have no prompt named {name!r} ({', '.join(prompts)})")
        return prompts[name]
    kinds = {p.kind for p in prompts.values()}
    if kinds == {"single", "pairwise"}:
        raise ValueError("the pasted FastChat prompts grade single answers and compare pairs: put the prompt to use in "
                         "the protocol name (single-v1 grades with FastChat's four single-answer judges, pair-v2 "
                         "compares pairs)")  # fmt: skip
    return fastchat_grading_family(prompts).single if kinds == {"single"} else fastchat_pairwise_family(prompts).single


def protocol_of(config: JudgeConfig, *, tokenizer=None) -> JudgeProtocol:
    """The config's protocol (its YAML text when given, else the bundled name); ValueError when invalid.

    The text may instead be FastChat's ``judge_prompts.jsonl`` lines: then ``protocol_name`` picks one
    of its prompts by FastChat's name (needed when the lines hold both kinds), and verdicts are read by
    FastChat's rules. Grading with FastChat's ``single-v1`` uses its four single-answer judges
    (:func:`grading_protocols_of`)."""
    fastchat = fastchat_prompts_of(config)
    if fastchat is not None:
        return _fastchat_protocol(config, fastchat)
    if config.protocol_yaml.strip():
        if len(config.protocol_yaml) > MAX_PROTOCOL_CHARS:
            raise ValueError(f"the protocol is longer than {MAX_PROTOCOL_CHARS} characters")
        try:
            data = yaml.safe_load(config.protocol_yaml)
        except yaml.YAMLError as exc:
            raise ValueError(f"the protocol is not valid YAML: {str(exc).splitlines()[0]}") from None
        protocol = protocol_from_dict(data, where="protocol")
        if tokenizer is not None and protocol.kind == "pairwise" and protocol.verdict.method == "logprob":
            protocol.verdict_token_ids(tokenizer)
    else:
        name = config.protocol_name.strip()
        if not name:
            raise ValueError("give a bundled protocol name or the protocol's YAML")
        if name not in bundled_protocols():
            raise ValueError(f"protocol {name!r} is not bundled; choose one of {', '.join(bundled_protocols())}")
        protocol = load_protocol(name, tokenizer=tokenizer)
    return protocol


def grading_protocols_of(config: JudgeConfig) -> GradingProtocols:
    """A single-answer config's protocol family: the bundled MT-Bench family (plain and
    reference-guided, turn 1 and turn 2 in context) for ``mt-bench-single``, else its one protocol."""
    protocol = protocol_of(config)
    if protocol.kind != "single":
        raise ValueError(f"protocol {protocol.name!r} compares pairs; grading needs a single-answer protocol")
    fastchat = fastchat_prompts_of(config)
    if fastchat is not None:  # FastChat's one-turn judge stands for its four; another prompt grades alone
        family = fastchat_grading_family(fastchat)
        return family if protocol.name == family.single.name else family_of_one(protocol, protocol.name)
    if not config.protocol_yaml.strip() and config.protocol_name.strip() in GRADING_FAMILIES:
        return load_grading_protocols(GRADING_FAMILIES[config.protocol_name.strip()])
    return family_of_one(protocol, protocol.name)


def _data_file(name: str, field: str) -> Path:
    """``name`` under PODIUM_DATA_DIR (no absolute path, no ``..``); ValueError naming the field."""
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts or not name.strip():
        raise ValueError(f"{field}: give a path relative to PODIUM_DATA_DIR, without '..'")
    if not settings.PODIUM_DATA_DIR:
        raise ValueError(f"{field}: PODIUM_DATA_DIR is not set")
    path = Path(settings.PODIUM_DATA_DIR) / rel
    if not path.is_file():
        raise ValueError(f"{field}: {name} is not a file under PODIUM_DATA_DIR")
    return path


def questions_of(config: JudgeConfig) -> list[JudgeQuestion]:
    """The config's questions: its ``questions_file`` (``sample``: the bundled two-turn set) with its
    ``references_file``, else its ``instructions``; ValueError naming the problem."""
    name = config.questions_file.strip()
    if name and config.kind != "single":
        raise ValueError("questions_file: pairwise judges take their instructions from the instructions field")
    if name:
        path = SAMPLE_QUESTIONS if name == SAMPLE_NAME else _data_file(name, "questions_file")
        refs = _data_file(config.references_file.strip(), "references_file") if config.references_file.strip() else None
        questions = read_questions(path, references_path=refs)
    else:
        if config.references_file.strip():
            raise ValueError("references_file: it completes a questions_file; give both or neither")
        questions = questions_from_items(config.instructions)
    if len(questions) > MAX_INSTRUCTIONS:
        raise ValueError(f"at most {MAX_INSTRUCTIONS} questions, got {len(questions)}")
    return questions


def grading_key(config: JudgeConfig, family: GradingProtocols) -> str:
    """What keys a single-answer config's grades: its protocol family and its reference mode."""
    payload = json.dumps({"protocols": family.sha256, "reference_mode": config.reference_mode})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _resolved(args: dict) -> dict:
    args = dict(args)
    for key in ("path", "tokenizer"):  # a checkpoint folder, an endpoint judge's tokenizer folder
        if key in args and not Path(str(args[key])).is_absolute():
            args[key] = str(Path(settings.PODIUM_MODELS_DIR) / str(args[key]))
    return args


def spec_of(backend: str, args: dict) -> tuple[str, tuple]:
    """A hashable model-pool key: the backend name and its sorted, resolved arguments."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    return backend, tuple(sorted((str(k), str(v)) for k, v in _resolved(args).items()))


def judge_spec(config: JudgeConfig) -> tuple[str, tuple]:
    """The judge's pool key: its catalogue entry's backend, or the config's own backend and arguments."""
    if config.judge_model_id is not None:
        model = config.judge_model
        return spec_of(model.backend or "hf", model.model_args)
    if not config.judge_backend or not config.judge_model_args:
        raise ValueError("the judge needs a catalogue model, or a backend with model arguments (a path)")
    return spec_of(config.judge_backend, config.judge_model_args)


def answerer_of(model: LanguageModel) -> tuple[tuple[str, tuple], dict]:
    """How to load ``model`` and decode its answers: (pool key, generation settings).

    A finished submission registered under this catalogue entry is loaded from its checkpoint and
    answers greedily; an arena model (including one evaluated through its endpoint: that submission
    has no checkpoint) from its backend, with its system prompt and decoding settings.
    """
    submission = (
        Submission.objects.filter(language_model=model, status=Submission.Status.FINISHED)
        .exclude(source=Submission.Source.ENDPOINT).order_by("-id").first()
    )
    if submission is not None:
        args = {**settings.LEADERBOARD_EVAL_BACKEND_ARGS, "path": submission.storage_path, "dtype": submission.precision}
        spec = spec_of(settings.LEADERBOARD_EVAL_BACKEND, args)  # the engine that evaluates submissions
        return spec, {"source": SUBMISSION_KEY, "temperature": 0.0, "top_p": 1.0, "system_prompt": ""}
    if not model.backend or not model.model_args:
        raise ValueError(f"model {model.name!r} has no finished submission and no backend to load it with")
    generation = model.generation or {}
    return spec_of(model.backend, model.model_args), {
        "source": "arena",
        "temperature": float(generation.get("temperature", 0.0) or 0.0),
        "top_p": float(generation.get("top_p", 1.0) or 1.0),
        "seed": int(generation.get("seed", 0) or 0),
        "system_prompt": model.system_prompt or "",
    }


def model_load(spec: tuple[str, tuple]):
    """The worker's loaded copy of the model behind ``spec`` (kept in the per-process pool)."""
    backend, args = spec
    return pool.get(spec, lambda: evalcore.models.load_backend(backend, **dict(args)))
