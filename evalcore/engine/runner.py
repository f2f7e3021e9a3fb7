"""The runner: documents -> prompts -> model requests -> per-document records -> scores.

::

    from evalcore.engine import TaskIndex, evaluate
    from evalcore.models import load_backend

    index = TaskIndex()
    tasks, groups = index.resolve(["gsm8k"])
    run = evaluate(load_backend("hf", path=DIR), tasks, groups=groups, index=index, limit=10)
    run.results["gsm8k"]["exact_match,strict-match"].value
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from evalcore.engine import metrics as m
from evalcore.engine.chat import ChatOptions, decoding_settings, parse_gen_kwargs
from evalcore.engine.config import GroupConfig, TaskConfig
from evalcore.engine.records import build_records, fewshot_pool
from evalcore.engine.scoring import (
    aggregate,
    filter_records,
    metric_key,
    runs_programs,
    score_records,
    tampering_summary,
)
from evalcore.engine.seeds import DEFAULT_FEWSHOT_SEED, Seeds, as_seeds
from evalcore.jail import jail_protocol, require_referee
from evalcore.models.base import Backend, GenerationRequest, LoglikelihoodRequest, RollingRequest
from evalcore.models.chat_templates import NAMED_TEMPLATE_REFUSED

__all__ = ["DEFAULT_FEWSHOT_SEED", "RunResult", "Seeds", "TaskResult", "build_records", "evaluate", "evaluate_task",
           "fewshot_pool", "run_requests"]  # fmt: skip


@dataclass(frozen=True)
class TaskResult:
    """One task's numbers, its protocol and its per-document records."""

    task: str
    metrics: dict[str, m.MetricValue]
    protocol: dict
    records: list[dict] = field(repr=False)


@dataclass(frozen=True)
class RunResult:
    """Everything a run produced; :func:`evalcore.engine.results.write_run` saves it."""

    tasks: dict[str, TaskResult]
    groups: dict[str, dict[str, m.MetricValue]]
    model: dict
    settings: dict
    wall_time_s: float

    @property
    def results(self) -> dict[str, dict[str, m.MetricValue]]:
        return {**{name: t.metrics for name, t in self.tasks.items()}, **self.groups}


def _generation_request(record: dict, seed: int, decoding: dict) -> GenerationRequest:
    return GenerationRequest(
        context=record["prompt"],
        messages=tuple((m["role"], m["content"]) for m in record.get("messages") or ()),
        until=tuple(decoding["until"]),
        max_gen_toks=decoding["max_gen_toks"],
        do_sample=decoding["do_sample"],
        temperature=decoding["temperature"],
        top_p=decoding["top_p"],
        seed=seed,
    )


def task_decoding(config: TaskConfig, gen_kwargs: dict | None) -> tuple[dict, dict, dict]:
    """:func:`evalcore.engine.chat.decoding_settings` for ``config`` (its few-shot delimiter the default stop)."""
    return decoding_settings(config.generation_kwargs, gen_kwargs or {}, config.get("fewshot_delimiter", "\n\n"))


def run_requests(backend: Backend, config: TaskConfig, records: list[dict], *, seed: int, progress=None,
                 apply_chat_template: bool = False, gen_kwargs: dict | None = None) -> None:  # fmt: skip
    """Ask the model and store raw responses in the records (in place).

    With a chat template the answer follows the assistant's turn directly, so the target delimiter is
    dropped (as the harness does).
    """
    kind = config.output_type
    delimiter = "" if apply_chat_template else config.get("target_delimiter", " ")
    if kind == "multiple_choice":
        wants_mi = any(e["metric"] == "acc_mutual_info" for e in m.metric_entries(config))
        requests, spans = [], []
        for record in records:
            start = len(requests)
            if "contexts" in record:
                requests += [
                    LoglikelihoodRequest(c, f"{delimiter}{record['continuation']}")
                    for c in record["contexts"]
                ]
            else:
                requests += [
                    LoglikelihoodRequest(record["prompt"], f"{delimiter}{c}") for c in record["choices"]
                ]
            if wants_mi:
                requests += [LoglikelihoodRequest("", f"{delimiter}{c}") for c in record["choices"]]
            spans.append(start)
        answers = backend.loglikelihood(requests, progress=progress)
        for record, start in zip(records, spans):
            k = len(record["choices"])
            record["choice_logprobs"] = [a.logprob for a in answers[start : start + k]]
            record["choice_is_greedy"] = [a.is_greedy for a in answers[start : start + k]]
            if wants_mi:
                record["unconditional_logprobs"] = [a.logprob for a in answers[start + k : start + 2 * k]]
    elif kind == "loglikelihood":
        answers = backend.loglikelihood(
            [LoglikelihoodRequest(r["prompt"], str(r["target"])) for r in records], progress=progress
        )
        for record, answer in zip(records, answers):
            record["logprob"], record["is_greedy"] = answer.logprob, answer.is_greedy
    elif kind == "loglikelihood_rolling":
        window = config.get("rolling_window") or {}
        answers = backend.loglikelihood_rolling(
            [
                RollingRequest(str(r["target"]), window.get("max_length"), window.get("stride"))
                for r in records
            ],
            progress=progress,
        )
        for record, answer in zip(records, answers):
            text = str(record["target"])
            record.update(
                logprob=answer.logprob,
                num_tokens=answer.num_tokens,
                words=len(text.split()),
                bytes=len(text.encode("utf-8")),
            )
    else:
        repeats = config.get("repeats", 1)
        decoding, _, _ = task_decoding(config, gen_kwargs)
        requests = [
            _generation_request(r, seed + 1000 * r["doc_id"] + k, decoding)
            for r in records
            for k in range(repeats)
        ]
        answers = backend.generate_until(requests, progress=progress)
        for i, record in enumerate(records):
            mine = answers[i * repeats : (i + 1) * repeats]
            record["responses"] = [a.text for a in mine]
            record["finish_reasons"] = [a.finish_reason for a in mine]


def _progress_bar(task: str, total: int, enabled: bool):
    if not enabled:
        return None, lambda: None
    bar = tqdm(total=total, desc=task, unit="req", leave=True)
    return bar.update, bar.close


def _json_messages(messages: list[dict]) -> str:
    """The prompt recorded for a chat endpoint: its messages' JSON (the harness logs the same)."""
    return json.dumps(messages, ensure_ascii=False)


def template_name(backend: Backend, apply_chat_template: bool | str) -> str | None:
    """The chat template's name in ``apply_chat_template`` (None for True/False), checked: a name must be
    a non-empty string, and a backend that sends messages (the endpoint renders) refuses one."""
    if isinstance(apply_chat_template, bool):
        return None
    if not isinstance(apply_chat_template, str) or not apply_chat_template:
        raise ValueError(f"apply_chat_template must be True, False or a template name, got {apply_chat_template!r}")
    if getattr(backend, "sends_messages", False):
        raise ValueError(NAMED_TEMPLATE_REFUSED)
    return apply_chat_template


def evaluate_task(backend: Backend, config: TaskConfig, *, num_fewshot=None, limit=None, seed: int | Seeds = 0,
                  fewshot_seed: int | None = None, progress: bool = False, apply_chat_template: bool | str = False,
                  system_instruction: str | None = None, fewshot_as_multiturn: bool = False,
                  gen_kwargs: dict | None = None, predict_only: bool = False) -> TaskResult:  # fmt: skip
    """One task on ``backend``. ``gen_kwargs`` (checked by :func:`evalcore.engine.chat.parse_gen_kwargs`)
    override the task's generation settings; ``predict_only`` keeps the responses unscored (``metrics``
    empty, each record's ``filtered`` answers kept; ``evalcore rescore`` scores the samples later). A backend that sends chat messages
    (``openai-chat``) gets generation prompts as conversations, the endpoint applying the template.

    ``seed`` is a :class:`~evalcore.engine.seeds.Seeds` (lm-eval's four seeds) or one integer for the
    random, sampling and bootstrap seeds beside ``fewshot_seed`` (default 1234):
    :func:`evalcore.engine.seeds.as_seeds`. ``apply_chat_template`` is True, or the name of one of the
    tokenizer's chat templates (lm-eval's ``apply_chat_template: bool | str``)."""
    started = time.perf_counter()
    seeds = as_seeds(seed, fewshot_seed)
    scoring = not predict_only
    jail = (
        require_referee() if scoring and runs_programs(config) else None
    )  # fail before asking the model anything
    sends_messages = (
        bool(getattr(backend, "sends_messages", False)) and config.output_type == "generate_until"
    )
    name = template_name(backend, apply_chat_template)
    template = bool(apply_chat_template) or sends_messages
    options = ChatOptions(template, system_instruction or None, fewshot_as_multiturn and template)
    chat = _json_messages if sends_messages else backend.chat_context
    if name is not None and not sends_messages:
        chat = functools.partial(backend.chat_context, chat_template=name)
    # Which template renders the prompts (an unknown name refused before any document is rendered).
    choice = backend.chat_template_choice(name) if template and not sends_messages else {}
    gen_kwargs = parse_gen_kwargs(gen_kwargs)  # checked here too: callers may come straight to a task
    records = build_records(config, num_fewshot=num_fewshot, limit=limit, seed=seeds, chat=chat, options=options)
    per_doc = {"multiple_choice": None, "generate_until": config.get("repeats", 1)}.get(config.output_type, 1)
    total = sum(len(r["choices"]) for r in records) if per_doc is None else per_doc * len(records)
    update, close = _progress_bar(config.task, total, progress)
    try:
        run_requests(backend, config, records, seed=seeds.sampling, progress=update, apply_chat_template=template,
                     gen_kwargs=gen_kwargs)  # fmt: skip
    finally:
        close()
    scored = score_records(config, records) if scoring else filter_records(config, records)
    metrics = aggregate(config, scored, seed=seeds.bootstrap) if scoring else {}
    first = scored[0]
    generation = config.output_type == "generate_until"
    decoding, sources, ignored = task_decoding(config, gen_kwargs)
    protocol = {
        "task": config.task,
        "version": config.version,
        "config": config.raw,
        "config_sha256": config.sha256,
        "source": config.source,
        "output_type": config.output_type,
        "num_fewshot": config.get("num_fewshot", 0) if num_fewshot is None else num_fewshot,
        "fewshot_sampler": config.fewshot_config.get("sampler", "default"),
        "fewshot_seed": seeds.fewshot,
        "seeds": seeds.as_dict(),
        "fewshot_doc_ids_first_doc": first["fewshot_ids"],
        "first_prompt": first["prompt"],
        "apply_chat_template": template,
        "chat": {
            "template": ("applied by the endpoint" if sends_messages else "the model's tokenizer")
            if template
            else None,
            **({"template_name": name} if template else {}),
            **choice,
            "system_instruction": options.system_instruction,
            "fewshot_as_multiturn": options.fewshot_as_multiturn,
            "first_messages": first.get("messages"),
        },
        "gen_kwargs": gen_kwargs if generation else {},
        "decoding": decoding if generation else None,
        "decoding_sources": sources if generation else None,
        "decoding_ignored": ignored if generation else None,
        "predict_only": predict_only,
        "n_docs": len(scored),
        "limit": limit,
        "wall_time_s": round(time.perf_counter() - started, 3),
    }
    if jail is not None:
        protocol["jail"] = jail_protocol(jail)
        protocol["tampering"] = tampering_summary(scored)
    return TaskResult(config.task, metrics, protocol, scored)


def evaluate(backend: Backend, tasks: list[TaskConfig], *, groups: list[GroupConfig] = (), index=None,
             num_fewshot: int | None = None, limit: int | None = None, seed: int | Seeds = 0,
             fewshot_seed: int | None = None, progress: bool = False, apply_chat_template: bool | str = False,
             system_instruction: str | None = None, fewshot_as_multiturn: bool = False, gen_kwargs=None,
             predict_only: bool = False) -> RunResult:  # fmt: skip
    """Run ``tasks`` on ``backend`` and aggregate ``groups``; raises on any task failure.

    The seeds, the chat options, ``gen_kwargs`` (a dict or ``--gen-kwargs`` text) and ``predict_only``
    are :func:`evaluate_task`'s; every option is checked before the first request is sent. Seeds that
    are not set are drawn once, so every task shares them.
    """
    if not tasks:
        raise ValueError("no tasks to run")
    seeds = as_seeds(seed, fewshot_seed)
    gen_kwargs = parse_gen_kwargs(gen_kwargs)
    sends_messages = bool(getattr(backend, "sends_messages", False))
    ChatOptions(
        bool(apply_chat_template) or sends_messages, system_instruction, fewshot_as_multiturn
    )  # checks them
    name = template_name(backend, apply_chat_template)
    if apply_chat_template and not sends_messages:
        backend.chat_template_choice(name)  # a template name the tokenizer lacks: refused before any task
    if not getattr(backend, "scores_loglikelihood", True):
        refused = [c.task for c in tasks if c.output_type != "generate_until"]
        if refused:
            raise ValueError(
                f"tasks {refused} score log-likelihoods, which a chat-completions endpoint does not give "
                f"(lm-evaluation-harness refuses them too): run them with the openai backend (completions) "
                f"against a server that returns prompt log-probabilities, or pass completions_logprobs=true "
                f"if this endpoint also serves /completions with echo and logprobs"
            )
    started = time.perf_counter()
    results = {}
    for config in tasks:
        results[config.task] = evaluate_task(
            backend, config, num_fewshot=num_fewshot, limit=limit, seed=seeds,
            progress=progress, apply_chat_template=apply_chat_template, system_instruction=system_instruction,
            fewshot_as_multiturn=fewshot_as_multiturn, gen_kwargs=gen_kwargs, predict_only=predict_only,
        )  # fmt: skip
    group_results = {}
    for group in groups:
        members = index.group_members(group) if index is not None else list(group.tasks)
        parts = [results[name] for name in members if name in results and not predict_only]
        aggregates = group.aggregate or ({"metric": "acc", "weight_by_size": True},)
        values = {}
        for item in aggregates:
            metric = item["metric"]
            filter_name = item.get("filter_list") or "none"
            if isinstance(filter_name, list):
                filter_name = filter_name[0]
            metric = metric_key(metric, filter_name)
            available = [p.metrics[metric] for p in parts if metric in p.metrics]
            if available:
                values[metric] = m.group_value(
                    available, weight_by_size=bool(item.get("weight_by_size", True))
                )
        group_results[group.group] = values
    settings = {
        "num_fewshot": num_fewshot, "limit": limit, "seed": seeds.as_list(), "fewshot_seed": seeds.fewshot,
        "seeds": seeds.as_dict(),
        "apply_chat_template": apply_chat_template, "system_instruction": system_instruction,
        "fewshot_as_multiturn": fewshot_as_multiturn, "gen_kwargs": gen_kwargs, "predict_only": predict_only,
    }  # fmt: skip
    return RunResult(
        results, group_results, backend.identity.as_dict(), settings, round(time.perf_counter() - started, 3)
    )
