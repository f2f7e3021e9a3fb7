"""Score per-document records (the ``--log-samples`` lines) under a task config.

Everything here works from stored responses only, which is what makes re-scoring possible: a
record holds the document, its prompt and target, and the raw responses (per-choice
log-probabilities or generated texts). :func:`score_records` applies the config's filters and
metrics to every record and :func:`aggregate` turns per-document values into reported numbers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from evalcore.engine import metrics as m
from evalcore.engine.config import TaskConfig
from evalcore.engine.filters import pipelines
from evalcore.engine.prompts import Prompter
from evalcore.engine.sandbox import run_program
from evalcore.engine.textnorm import max_f1


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


def _execute(programs: list[str], timeout: float, memory_mb: int) -> list[bool]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return [r.passed for r in pool.map(lambda p: run_program(p, timeout=timeout, memory_mb=memory_mb), programs)]


def score_record(config: TaskConfig, record: dict, entries: list[dict]) -> tuple[dict, dict]:
    """(filtered responses per pipeline, per-metric values) for one record.

    Ratio metrics return (log-likelihood, units) pairs that :func:`aggregate` sums.
    """
    kind = config.output_type
    values: dict = {}
    filtered: dict = {}
    wanted = {e["metric"] for e in entries}
    if kind == "multiple_choice":
        gold = gold_index(record["target"], record["choices"])
        scores = m.multiple_choice_scores(
            record["choice_logprobs"],
            record["choices"],
            gold,
            greedy=record.get("choice_is_greedy"),
            unconditional=record.get("unconditional_logprobs"),
        )
        for name in wanted:
            if name not in scores:
                raise ValueError(f"task {config.task!r}: metric {name!r} needs responses this record lacks")
            values[name] = scores[name]
    elif kind == "loglikelihood":
        if "acc" in wanted:
            values["acc"] = float(record["is_greedy"])
        if "perplexity" in wanted:
            values["perplexity"] = (record["logprob"], 1)
    elif kind == "loglikelihood_rolling":
        units = {
            "word_perplexity": record["words"],
            "byte_perplexity": record["bytes"],
            "bits_per_byte": record["bytes"],
            "token_perplexity": record["num_tokens"],
        }
        for name in wanted:
            values[name] = (record["logprob"], units[name])
    else:
        gold = _generation_gold(config, record)
        for filter_name, apply in pipelines(config.get("filter_list")):
            responses = apply(list(record["responses"]))
            filtered[filter_name] = responses
            for entry in entries:
                name = entry["metric"]
                key = metric_key(name if name != "pass@k" else "pass@k", filter_name)
                if name == "exact_match":
                    options = {k: entry[k] for k in m.METRIC_OPTIONS["exact_match"] if k in entry}
                    answer = responses[0] if responses else ""
                    golds = gold if isinstance(gold, list) else [gold]
                    values[key] = max(m.exact_match(answer, g, **options) for g in golds)
                elif name == "f1":
                    values[key] = max_f1(responses[0] if responses else "", gold)
                elif name == "pass@k":
                    ks = entry.get("k", [1])
                    ks = [ks] if isinstance(ks, int) else list(ks)
                    programs = [f"{record['prompt']}{r}\n\n{gold}\n" for r in responses]
                    passed = _execute(programs, float(entry.get("timeout", 10.0)), int(entry.get("memory_mb", 1024)))
                    filtered[f"{filter_name}:passed"] = passed
                    for k in ks:
                        values[metric_key(f"pass@{k}", filter_name)] = m.pass_at_k(len(passed), sum(passed), k)
    return filtered, values


def score_records(config: TaskConfig, records: list[dict]) -> list[dict]:
    """Fill ``filtered`` and ``metrics`` of every record (new dicts, inputs untouched)."""
    entries = m.metric_entries(config)
    scored = []
    for record in records:
        filtered, values = score_record(config, record, entries)
        scored.append({**record, "filtered": filtered, "metrics": values})
    return scored


def aggregate(config: TaskConfig, records: list[dict], *, seed: int = 0) -> dict[str, m.MetricValue]:
    """Reported numbers (value, stderr, 95% interval, n) for every metric key in the records."""
    if not records:
        raise ValueError(f"task {config.task!r} has no scored documents")
    entries = {e["metric"]: e for e in m.metric_entries(config)}
    keys = list(records[0]["metrics"])
    results = {}
    for key in keys:
        base = key.split(",")[0]
        family = "pass@k" if base.startswith("pass@") else base
        entry = entries.get(family, {})
        higher = entry.get("higher_is_better", base not in m.LOWER_IS_BETTER)
        column = [r["metrics"][key] for r in records]
        if base in m.RATIO_METRICS:
            numerators = [c[0] for c in column]
            denominators = [c[1] for c in column]
            results[key] = m.ratio_value(base, numerators, denominators, seed=seed)
        else:
            results[key] = m.mean_value(column, higher_is_better=bool(higher))
    return results
