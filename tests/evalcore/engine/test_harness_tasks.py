"""The harness's own task files give the harness's numbers, document by document.

Each case (``harness_cases.py``) copies lm-evaluation-harness 0.4.13's YAML and ``utils.py`` files,
overrides only the data location (a few local documents in the hub data set's layout) and runs
the engine on SmolLM2-135M-Instruct (float32, CPU). The expected values were recorded from the
harness itself on the same files and weights (``bench/record_harness_reference.py`` ->
``data/harness_reference/<case>.json``, harness version inside): identical prompts and targets,
log-likelihoods within 1e-4, identical generations, equal per-document and aggregated metrics (within
1e-4 too: truthfulqa_mc2 turns log-likelihoods into a probability). humaneval and mbpp
(``unsafe_code``) score with evaluate's code_eval: the harness ran the hub's script on its
programs, the engine runs the same programs in its jail (``evalcore.jail.code_eval``).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from evalcore.engine import TaskIndex, evaluate_task
from tests.evalcore.engine.harness_cases import CASES, REFERENCE, build_case, use_punkt_tab

TOLERANCE = 1e-4
# Task code beside these harness files imports packages from the dev extra (pyproject.toml): a missing
# one is an install problem, so the case fails and says which.
NEEDS_PACKAGE = {"minerva_math_algebra": "math_verify", "ifeval": "punkt", "hellaswag": "datasets",
                 "gpqa_main_zeroshot": "datasets", "bbh_date_understanding": "lm_eval"}  # fmt: skip


def _reference(case: str) -> dict:
    path = REFERENCE / f"{case}.json"
    if not path.exists():
        pytest.fail(f"no recording for {case}: run bench/record_harness_reference.py with the harness's Python")
    return json.loads(path.read_text())


def _ensure_packages(case: str) -> None:
    for package in {NEEDS_PACKAGE.get(case), *(("lm_eval", "langdetect") if case == "ifeval" else ())} - {None}:
        if importlib.util.find_spec(package) is None:
            pytest.fail(f"{case}'s task code needs {package}: install the dev extra (pip install -e '.[dev]')")


def _requests(config, record: dict) -> list:
    """The (context, continuation) pairs or the generation context the engine sent, as the harness logs them."""
    delimiter = config.get("target_delimiter", " ")
    if "contexts" in record:
        return [[c, f"{delimiter}{record['continuation']}"] for c in record["contexts"]]
    if config.output_type == "multiple_choice":
        return [[record["prompt"], f"{delimiter}{c}"] for c in record["choices"]]
    return [[record["prompt"]]]


def _podium_key(key: str) -> str:
    return key[: -len(",none")] if key.endswith(",none") else key


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_harness_task_files_match_the_harness_per_document(case, smollm2, tmp_path, monkeypatch):
    reference = _reference(case)
    _ensure_packages(case)
    task = build_case(case, tmp_path / case)
    if case == "ifeval":
        monkeypatch.setattr("nltk.data.path", list(importlib.import_module("nltk").data.path))
        use_punkt_tab(tmp_path / "nltk_data")
    configs, _ = TaskIndex([tmp_path / case], bundled=False, trust_task_code=True).resolve([task])
    result = evaluate_task(smollm2, configs[0], seed=0, fewshot_seed=1234)
    records = {r["doc_id"]: r for r in result.records}
    assert sorted(records) == [s["doc_id"] for s in reference["samples"]]
    for expected in reference["samples"]:
        record = records[expected["doc_id"]]
        where = f"{case} doc {expected['doc_id']}"
        sent = _requests(configs[0], record)
        assert [a[: len(s)] for a, s in zip(expected["arguments"], sent)] == sent, f"{where}: prompts differ"
        target = record.get("continuation", record["target"])
        assert target == expected["target"], f"{where}: target"
        if configs[0].output_type == "generate_until":
            assert record["responses"] == [r[0] for r in expected["resps"]], f"{where}: generations differ"
        else:
            theirs = [r[0][0] for r in expected["resps"]]
            assert record["choice_logprobs"] == pytest.approx(theirs, abs=TOLERANCE), f"{where}: log-likelihoods"
        for key, value in expected["metrics"].items():
            assert record["metrics"][_podium_key(key)] == pytest.approx(value, abs=TOLERANCE), f"{where}: {key}"
    for key, value in reference["metrics"].items():
        if "," not in key:
            continue  # the harness's name and sample_len
        assert result.metrics[_podium_key(key)].value == pytest.approx(value, abs=TOLERANCE), f"{case}: {key}"
