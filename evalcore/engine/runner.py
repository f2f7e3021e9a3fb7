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

import random
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from evalcore.engine import metrics as m
from evalcore.engine.config import GroupConfig, TaskConfig
from evalcore.engine.data import evaluation_docs, load_splits, split_docs
from evalcore.engine.prompts import FewshotSampler, Prompter
from evalcore.engine.sandbox import jail_protocol
from evalcore.engine.scoring import aggregate, metric_key, runs_programs, score_records, tampering_summary
from evalcore.engine.verdicts import require_referee
from evalcore.models.base import Backend, GenerationRequest, LoglikelihoodRequest, RollingRequest

DEFAULT_FEWSHOT_SEED = 1234  # the harness's default fewshot_random_seed


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


def fewshot_pool(config: TaskConfig, splits: dict[str, list[dict]]) -> tuple[str | None, list[dict]]:
    """(split name, documents) few-shot examples come from: inline samples, then the splits."""
    samples = config.fewshot_config.get("samples")
    if callable(samples):
        samples = list(samples())  # a trusted task's list of examples (the harness calls it the same way)
    if samples is not None:
        if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
            raise ValueError(f"task {config.task!r}: fewshot_config.samples must be a list of documents")
        return None, samples
    for which in ("fewshot_split", "training_split", "validation_split", "test_split"):
        docs = split_docs(config, splits, which)
        if docs is not None and (which != "test_split" or config.get("fewshot_split")):
            return config.get(which), docs
    return None, []


def build_records(config: TaskConfig, *, num_fewshot: int | None, limit: int | None, seed: int, fewshot_seed: int,
                  chat=None) -> list[dict]:  # fmt: skip
    """One record per evaluated document: id, document, prompt, target, few-shot ids, choices.

    ``chat``, when given, renders the whole few-shot prompt as one user message with the model's chat
    template (as lm-evaluation-harness does with ``--apply_chat_template``); the record's prompt is then
    the rendered text, exactly what the model reads.
    """
    if config.get("process_docs") is not None:
        # Task code may draw from Python's global random (gpqa shuffles its answers): seed it as the
        # harness does (random.seed(random_seed), default 0) so the same documents come out.
        random.seed(seed)
    splits = load_splits(config)
    split_name, docs = evaluation_docs(config, splits)
    if limit is not None:
        if limit < 1:
            raise ValueError("--limit must be a positive number of documents")
        docs = docs[:limit]
    shots = config.get("num_fewshot", 0) if num_fewshot is None else num_fewshot
    pool_split, pool = fewshot_pool(config, splits)
    if shots and not pool:
        raise ValueError(f"task {config.task!r} asks for {shots} few-shot examples but has no few-shot split")
    sampler = FewshotSampler(
        pool,
        sampler=config.fewshot_config.get("sampler", "default"),
        seed=fewshot_seed,
        same_split=pool_split is not None and pool_split == split_name,
    )
    prompter = Prompter(config)
    records = []
    for doc_id, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise ValueError(f"task {config.task!r}: document {doc_id} is not a mapping")
        fewshot_ids = sampler.sample(shots, doc)
        records.append(_record(config, prompter, doc_id, doc, [pool[i] for i in fewshot_ids], fewshot_ids, chat))
    return records


def _record(config: TaskConfig, prompter: Prompter, doc_id: int, doc: dict, shots: list[dict], fewshot_ids: list[int],
            chat) -> dict:  # fmt: skip
    wrap = (lambda text: chat([{"role": "user", "content": text}])) if chat is not None else (lambda text: text)
    record = {"doc_id": doc_id, "doc": doc, "fewshot_ids": fewshot_ids}
    if config.output_type == "multiple_choice" and prompter.is_multiple_input(doc):
        # Winogrande style: one context per choice, the target is the shared continuation.
        choices = prompter.choices(doc)
        record["contexts"] = [wrap(prompter.context(doc, shots, text=choice)) for choice in choices]
        record["prompt"] = record["contexts"][0]
        record["choices"] = choices
        record["continuation"] = str(prompter.target(doc))
        record["target"] = prompter.text(doc)
        return record
    record["prompt"] = wrap(prompter.context(doc, shots))
    if config.output_type == "multiple_choice":
        record["choices"] = prompter.choices(doc)
    record["target"] = prompter.target(doc)
    return record


def _generation_request(config: TaskConfig, prompt: str, seed: int) -> GenerationRequest:
    kwargs = dict(config.generation_kwargs)
    until = kwargs.get("until", [config.get("fewshot_delimiter", "\n\n")])
    until = (until,) if isinstance(until, str) else tuple(until)
    temperature = float(kwargs.get("temperature", 0.0))
    return GenerationRequest(
        context=prompt,
        until=until,
        max_gen_toks=int(kwargs.get("max_gen_toks", kwargs.get("max_new_tokens", 256))),
        do_sample=bool(kwargs.get("do_sample", False)) and temperature > 0,
        temperature=temperature,
        top_p=float(kwargs.get("top_p", 1.0)),
        seed=seed,
    )


def run_requests(backend: Backend, config: TaskConfig, records: list[dict], *, seed: int, progress=None,
                 apply_chat_template: bool = False) -> None:  # fmt: skip
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
                requests += [LoglikelihoodRequest(c, f"{delimiter}{record['continuation']}") for c in record["contexts"]]
            else:
                requests += [LoglikelihoodRequest(record["prompt"], f"{delimiter}{c}") for c in record["choices"]]
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
        answers = backend.loglikelihood([LoglikelihoodRequest(r["prompt"], str(r["target"])) for r in records], progress=progress)
        for record, answer in zip(records, answers):
            record["logprob"], record["is_greedy"] = answer.logprob, answer.is_greedy
    elif kind == "loglikelihood_rolling":
        window = config.get("rolling_window") or {}
        answers = backend.loglikelihood_rolling(
            [RollingRequest(str(r["target"]), window.get("max_length"), window.get("stride")) for r in records],
            progress=progress,
        )
        for record, answer in zip(records, answers):
            text = str(record["target"])
            record.update(logprob=answer.logprob, num_tokens=answer.num_tokens, words=len(text.split()), bytes=len(text.encode("utf-8")))
    else:
        repeats = config.get("repeats", 1)
        requests = [
            _generation_request(config, r["prompt"], seed + 1000 * r["doc_id"] + k) for r in records for k in range(repeats)
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


def evaluate_task(backend: Backend, config: TaskConfig, *, num_fewshot=None, limit=None, seed=0,
                  fewshot_seed=DEFAULT_FEWSHOT_SEED, progress: bool = False,
                  apply_chat_template: bool = False) -> TaskResult:  # fmt: skip
    started = time.perf_counter()
    jail = require_referee() if runs_programs(config) else None  # fail before asking the model anything
    chat = backend.chat_context if apply_chat_template else None
    records = build_records(
        config, num_fewshot=num_fewshot, limit=limit, seed=seed, fewshot_seed=fewshot_seed, chat=chat
    )
    per_doc = {"multiple_choice": None, "generate_until": config.get("repeats", 1)}.get(config.output_type, 1)
    total = sum(len(r["choices"]) for r in records) if per_doc is None else per_doc * len(records)
    update, close = _progress_bar(config.task, total, progress)
    try:
        run_requests(backend, config, records, seed=seed, progress=update, apply_chat_template=apply_chat_template)
    finally:
        close()
    scored = score_records(config, records)
    metrics = aggregate(config, scored, seed=seed)
    first = scored[0]
    protocol = {
        "task": config.task,
        "version": config.version,
        "config": config.raw,
        "config_sha256": config.sha256,
        "source": config.source,
        "output_type": config.output_type,
        "num_fewshot": config.get("num_fewshot", 0) if num_fewshot is None else num_fewshot,
        "fewshot_sampler": config.fewshot_config.get("sampler", "default"),
        "fewshot_seed": fewshot_seed,
        "fewshot_doc_ids_first_doc": first["fewshot_ids"],
        "first_prompt": first["prompt"],
        "apply_chat_template": apply_chat_template,
        "decoding": dict(config.generation_kwargs) if config.output_type == "generate_until" else None,
        "n_docs": len(scored),
        "limit": limit,
        "wall_time_s": round(time.perf_counter() - started, 3),
    }
    if jail is not None:
        protocol["jail"] = jail_protocol(jail)
        protocol["tampering"] = tampering_summary(scored)
    return TaskResult(config.task, metrics, protocol, scored)


def evaluate(backend: Backend, tasks: list[TaskConfig], *, groups: list[GroupConfig] = (), index=None,
             num_fewshot: int | None = None, limit: int | None = None, seed: int = 0,
             fewshot_seed: int = DEFAULT_FEWSHOT_SEED, progress: bool = False,
             apply_chat_template: bool = False) -> RunResult:  # fmt: skip
    """Run ``tasks`` on ``backend`` and aggregate ``groups``; raises on any task failure."""
    if not tasks:
        raise ValueError("no tasks to run")
    started = time.perf_counter()
    results = {}
    for config in tasks:
        results[config.task] = evaluate_task(
            backend, config, num_fewshot=num_fewshot, limit=limit, seed=seed, fewshot_seed=fewshot_seed,
            progress=progress, apply_chat_template=apply_chat_template,
        )  # fmt: skip
    group_results = {}
    for group in groups:
        members = index.group_members(group) if index is not None else list(group.tasks)
        parts = [results[name] for name in members if name in results]
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
                values[metric] = m.group_value(available, weight_by_size=bool(item.get("weight_by_size", True)))
        group_results[group.group] = values
    settings = {
        "num_fewshot": num_fewshot, "limit": limit, "seed": seed, "fewshot_seed": fewshot_seed,
        "apply_chat_template": apply_chat_template,
    }  # fmt: skip
    return RunResult(results, group_results, backend.identity.as_dict(), settings, round(time.perf_counter() - started, 3))
