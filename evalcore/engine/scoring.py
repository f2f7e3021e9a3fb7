"""Score per-document records (the ``--log-samples`` lines) under a task config.

Everything here works from stored responses only, which is what makes re-scoring possible: a
record holds the document, its prompt and target, and the raw responses (per-choice
log-probabilities or generated texts). :func:`score_records` applies the config's filters and
metrics to every record and :func:`aggregate` turns per-document values into reported numbers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from evalcore.engine import metrics as m
from evalcore.engine.config import TaskConfig
from evalcore.engine.corpus import corpus_value
from evalcore.engine.filters import pipelines
from evalcore.engine.prompts import Prompter, render
from evalcore.engine.textnorm import max_f1
from evalcore.jail import collecting_tampering, report_tampering, run_tests


def metric_key(metric: str, filter_name: str) -> str:
    """``exact_match`` for the default pipeline, ``exact_match,strict-match`` for a named one."""
    return metric if filter_name == "none" else f"{metric},{filter_name}"


def gold_index(target, choices: list[str]):
    """The gold choice index (or indices) from a target that is an index, a list or a choice text."""
    if isinstance(target, list):
        return [gold_index(t, choices) for t in target]
    if isinstance(target, bool):
        raise ValueError(f"target {target!r} is not a choice index")
    if isinstance(target, int):
        if not 0 <= target < len(choices):
            raise ValueError(f"target index {target} is out of range for {len(choices)} choices")
        return target
    if isinstance(target, str) and target in choices:
        return choices.index(target)
    raise ValueError(f"target {target!r} is neither a choice index nor one of the choices {choices}")


def _generation_gold(config: TaskConfig, record: dict):
    target = record["target"]
    if config.get("doc_to_choice") is not None and isinstance(target, int):
        return Prompter(config).choices(record["doc"])[target]
    return target


def _execute(candidates: list[str], tests: str, timeout: float, memory_mb: int, names, setup: str) -> list[bool]:
    """Whether each candidate program passes ``tests``: the candidate runs as a script (``__main__``) in one
    process of the jail, the tests in another that alone decides (:func:`evalcore.jail.verdicts.run_tests`),
    seeing only the candidate's ``names`` (None: the names the tests use and do not define) and the
    task's own ``setup``."""

    def one(candidate: str):
        return run_tests(candidate, tests, timeout=timeout, memory_mb=memory_mb, names=names, setup=setup)

    with ThreadPoolExecutor(max_workers=2) as pool:
        verdicts = list(pool.map(one, candidates))
    report_tampering(verdicts)
    return [v.passed for v in verdicts]


def _test_names(config: TaskConfig, entry: dict, doc: dict) -> tuple[list[str] | None, str]:
    """(the candidate names the tests call, the trusted setup) from a pass@k entry's ``entry_point`` and
    ``setup`` templates (each rendered for the document); (None, "") where the entry names neither."""
    names = None
    if entry.get("entry_point") is not None:
        text = render(str(entry["entry_point"]), doc, task=config.task, what="pass@k entry_point")
        names = [part.strip() for part in text.split(",") if part.strip()]
        bad = [n for n in names if not n.isidentifier() or n.startswith("__")]
        if not names or bad:
            raise ValueError(
                f"task {config.task!r}: pass@k entry_point {entry['entry_point']!r} gave {text[:80]!r} for document "
                f"{doc.get('task_id', '')!r}; it must render to one or more identifiers separated by commas"
            )
    setup = ""
    if entry.get("setup") is not None:
        setup = render(str(entry["setup"]), doc, task=config.task, what="pass@k setup")
    return names, setup


def metric_name(entry: dict) -> str:
    """The name a metric entry reports under (a ``!function`` metric: the function's name)."""
    name = entry["metric"]
    return name if isinstance(name, str) else getattr(name, "name", getattr(name, "__name__", str(name)))


def _custom_results(config: TaskConfig, doc: dict, results) -> dict:
    values = config.get("process_results")(doc, results)
    if not isinstance(values, dict):
        raise ValueError(f"task {config.task!r}: process_results returned {type(values).__name__}, not a mapping")
    return values


def _multiple_choice(config: TaskConfig, record: dict, entries: list[dict]) -> dict:
    if config.get("process_results") is not None:
        logprobs = list(record["choice_logprobs"]) + list(record.get("unconditional_logprobs") or [])
        greedy = list(record.get("choice_is_greedy") or [False] * len(record["choice_logprobs"]))
        greedy += [False] * (len(logprobs) - len(greedy))
        return _custom_results(config, record["doc"], list(zip(logprobs, greedy)))
    gold = gold_index(record["target"], record["choices"])
    scores = m.multiple_choice_scores(
        record["choice_logprobs"], record["choices"], gold,
        greedy=record.get("choice_is_greedy"), unconditional=record.get("unconditional_logprobs"),
    )  # fmt: skip
    prediction = int(max(range(len(record["choice_logprobs"])), key=lambda i: record["choice_logprobs"][i]))
    scores["f1"] = scores["mcc"] = [gold, prediction]
    values = {}
    for name in (metric_name(e) for e in entries):
        if name not in scores:
            raise ValueError(f"task {config.task!r}: metric {name!r} needs responses this record lacks")
        values[name] = scores[name]
    return values


def _call_metric(function, gold, answer, entry: dict):
    options = {k: v for k, v in entry.items() if k not in m.ENTRY_KEYS}
    try:
        return function(references=[gold], predictions=[answer], **options)
    except TypeError:
        return function([gold, answer])


def _generation_metric(entry: dict, gold, answer, filter_name: str) -> dict:
    name = entry["metric"]
    golds = gold if isinstance(gold, list) else [gold]
    if callable(name):
        score = _call_metric(name, gold, answer, entry)
        if isinstance(score, dict):
            return {metric_key(k, filter_name): v for k, v in score.items()}
        return {metric_key(metric_name(entry), filter_name): score}
    key = metric_key(name, filter_name)
    if name == "exact_match":
        options = {k: entry[k] for k in m.METRIC_OPTIONS["exact_match"] if k in entry}
        return {key: max(m.exact_match(answer, g, **options) for g in golds)}
    if name == "acc":
        return {key: float(any(str(answer) == str(g) for g in golds))}
    if name == "f1":
        return {key: max_f1(answer, gold)}
    return {key: [gold, answer]}  # bleu, chrf, ter: scored over the corpus


def _ends_custom(config: TaskConfig) -> list[bool]:
    """Per pipeline: whether its last step is a ``custom`` filter (whose per-document value is scored whole)."""
    return [p["filter"][-1].get("function") == "custom" if p["filter"] else False
            for p in config.get("filter_list") or [{"filter": []}]]  # fmt: skip


def _filtered(config: TaskConfig, record: dict):
    """(filter name, filtered responses, whether the pipeline ends in a custom filter) per pipeline."""
    for (filter_name, apply), whole in zip(pipelines(config.get("filter_list")), _ends_custom(config)):
        yield filter_name, apply(list(record["responses"]), record["doc"]), whole


def _generation(config: TaskConfig, record: dict, entries: list[dict]) -> tuple[dict, dict]:
    values: dict = {}
    filtered: dict = {}
    gold = _generation_gold(config, record)
    for filter_name, responses, whole in _filtered(config, record):
        filtered[filter_name] = responses
        # The harness scores what the last filter gave for the document: one answer after take_first,
        # the list a custom filter returned (humaneval's programs) as it is.
        answer = responses if whole else responses[0] if responses else ""
        if config.get("process_results") is not None:
            result = answer if len(responses) == 1 else responses
            values.update({metric_key(k, filter_name): v for k, v in _custom_results(config, record["doc"], [result]).items()})
            continue
        for entry in entries:
            if entry["metric"] != "pass@k":
                values.update(_generation_metric(entry, gold, answer, filter_name))
                continue
            ks = entry.get("k", [1])
            ks = [ks] if isinstance(ks, int) else list(ks)
            candidates = [f"{record['prompt']}{r}\n" for r in responses]
            names, setup = _test_names(config, entry, record["doc"])
            passed = _execute(candidates, f"{gold}\n", float(entry.get("timeout", 10.0)), int(entry.get("memory_mb", 1024)),
                              names, setup)  # fmt: skip
            filtered[f"{filter_name}:passed"] = passed
            for k in ks:
                values[metric_key(f"pass@{k}", filter_name)] = m.pass_at_k(len(passed), sum(passed), k)
    return filtered, values


def score_record(config: TaskConfig, record: dict, entries: list[dict]) -> tuple[dict, dict]:
    """(filtered responses per pipeline, per-metric values) for one record.

    Ratio metrics return (log-likelihood, units) pairs and corpus metrics [gold, prediction] pairs
    that :func:`aggregate` combines.
    """
    kind = config.output_type
    wanted = {metric_name(e) for e in entries}
    if kind == "multiple_choice":
        return {}, _multiple_choice(config, record, entries)
    if kind == "loglikelihood":
        if config.get("process_results") is not None:
            return {}, _custom_results(config, record["doc"], [(record["logprob"], record["is_greedy"])])
        values = {}
        if "acc" in wanted:
            values["acc"] = float(record["is_greedy"])
        if "perplexity" in wanted:
            values["perplexity"] = (record["logprob"], 1)
        return {}, values
    if kind == "loglikelihood_rolling":
        if config.get("process_results") is not None:
            return {}, _custom_results(config, record["doc"], [record["logprob"]])
        units = {
            "word_perplexity": record["words"],
            "byte_perplexity": record["bytes"],
            "bits_per_byte": record["bytes"],
            "token_perplexity": record["num_tokens"],
        }
        return {}, {name: (record["logprob"], units[name]) for name in wanted}
    return _generation(config, record, entries)


def runs_programs(config: TaskConfig) -> bool:
    """Whether scoring ``config`` executes generated programs (``unsafe_code``, or Podium's pass@k metric)."""
    return bool(config.get("unsafe_code")) or any(e["metric"] == "pass@k" for e in m.metric_entries(config))


def tampering_summary(records: list[dict]) -> dict:
    """How many scored documents carry tampering findings, with the first five, for a task's protocol."""
    tampered = [r for r in records if r.get("tampering")]
    return {
        "docs": len(tampered),
        "examples": [{"doc_id": r.get("doc_id"), "findings": list(r["tampering"][:5])} for r in tampered[:5]],
    }


def score_records(config: TaskConfig, records: list[dict]) -> list[dict]:
    """Fill ``filtered`` and ``metrics`` of every record (new dicts, inputs untouched)."""
    entries = m.metric_entries(config)
    scored = []
    for record in records:
        try:
            with collecting_tampering() as tampering:
                filtered, values = score_record(config, record, entries)
        except KeyError as exc:
            if not exc.args or exc.args[0] in record:
                raise
            raise ValueError(
                f"task {config.task!r} ({config.output_type}): document {record.get('doc_id', '?')}'s record has no "
                f"{exc.args[0]!r}; it was written by a task of another kind (rescore with the task that wrote it)"
            ) from None
        extra = {"tampering": tampering} if tampering else {}
        scored.append({**record, "filtered": filtered, "metrics": values, **extra})
    return scored


def filter_records(config: TaskConfig, records: list[dict]) -> list[dict]:
    """Fill ``filtered`` of every record (new dicts, inputs untouched) and compute no metric: what a
    predict-only run stores, the same answers per pipeline as :func:`score_records` gives (lm-eval's
    ``filtered_resps``), less the ``<filter>:passed`` verdicts, which need the programs run.
    Tasks that do not generate have no filtered answers (``{}``), as in a scored run."""
    if config.output_type != "generate_until":
        return [{**record, "filtered": {}} for record in records]
    return [{**record, "filtered": {name: answers for name, answers, _ in _filtered(config, record)}} for record in records]


def _aggregation(config: TaskConfig, entry: dict, base: str):
    if "aggregation" in entry:
        return entry["aggregation"]
    if config.output_type == "multiple_choice" and config.get("process_results") is None:
        return m.MC_DEFAULT_AGGREGATION.get(base, "mean")
    if config.output_type == "generate_until" and not callable(entry.get("metric")):
        return m.DEFAULT_AGGREGATION.get(base, "mean")
    return "mean"


def document_clusters(config: TaskConfig, records: list[dict]) -> list[str] | None:
    """Each record's cluster from the task's ``cluster_key`` template (None when the task names none).

    Documents of one cluster (questions on one passage) are not independent: their means get a
    cluster-robust interval (:func:`evalcore.engine.metrics.mean_value`).
    """
    template = config.get("cluster_key")
    if not template:
        return None
    clusters = []
    for record in records:
        if not isinstance(record.get("doc"), dict):
            raise ValueError(
                f"task {config.task!r}: cluster_key needs each record's document, and record "
                f"{record.get('doc_id', '?')} has none (records written without their documents)"
            )
        clusters.append(render(template, record["doc"], task=config.task, what="cluster_key"))
    return clusters


def aggregate(config: TaskConfig, records: list[dict], *, seed: int = 0) -> dict[str, m.MetricValue]:
    """Reported numbers (value, stderr, 95% interval, n) for every metric key in the records."""
    if not records:
        raise ValueError(f"task {config.task!r} has no scored documents")
    entries = {metric_name(e): e for e in m.metric_entries(config)}
    keys = list(records[0]["metrics"])
    clusters = document_clusters(config, records)
    results = {}
    for key in keys:
        base = key.split(",")[0]
        family = "pass@k" if base.startswith("pass@") else base
        entry = entries.get(family, {})
        higher = bool(entry.get("higher_is_better", base not in m.LOWER_IS_BETTER))
        column = [r["metrics"][key] for r in records]
        aggregation = _aggregation(config, entry, base)
        if callable(aggregation):
            results[key] = m.MetricValue(float(aggregation(column)), None, None, None, len(column), higher, "custom")
        elif aggregation in m.CORPUS_AGGREGATIONS:
            results[key] = corpus_value(aggregation, column, seed=seed, higher_is_better=higher)
        elif base in m.RATIO_METRICS:
            numerators = [c[0] for c in column]
            denominators = [c[1] for c in column]
            results[key] = m.ratio_value(base, numerators, denominators, seed=seed)
        elif aggregation == "median":
            results[key] = m.MetricValue(float(np.median(column)), None, None, None, len(column), higher, "median")
        else:
            results[key] = m.mean_value(column, higher_is_better=higher, metric=base, clusters=clusters)
    return results
