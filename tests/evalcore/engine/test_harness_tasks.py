"""The harness's own task files give the harness's numbers, document by document.

Each case (``harness_cases.py``) copies lm-evaluation-harness 0.4.13's YAML and ``utils.py`` files,
overrides only the data location (a few local documents in the hub data set's layout) and runs
the engine on SmolLM2-135M-Instruct (float32, CPU). The expected values were recorded from the
harness itself on the same files and weights (``bench/record_harness_reference.py`` ->
``data/harness_reference/<case>.json``, harness version inside): identical prompts and targets,
log-likelihoods within 1e-4, identical generations, equal per-document and aggregated metrics (within
1e-4 too: truthfulqa_mc2 turns log-likelihoods into a probability).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import sys

import pytest

from evalcore.engine import TaskIndex, evaluate_task
from tests.evalcore.engine.harness_cases import CASES, REFERENCE, build_case

TOLERANCE = 1e-4
LMEVAL_SITE = sorted(glob.glob("/work/main/var/lmeval-venv/lib/python3*/site-packages"))
NEEDS_LM_EVAL = {"bbh_date_understanding", "ifeval"}  # their utils.py import lm_eval (a RegexFilter, ifeval modules)
NEEDS_PACKAGE = {"minerva_math_algebra": "math_verify", "ifeval": "langdetect", "hellaswag": "datasets", "gpqa_main_zeroshot": "datasets"}


def _reference(case: str) -> dict:
    path = REFERENCE / f"{case}.json"
    if not path.exists():
        pytest.skip(f"no recording for {case}: run bench/record_harness_reference.py with the harness's Python")
    return json.loads(path.read_text())


def _ensure_lm_eval(case: str) -> None:
    if case in NEEDS_PACKAGE:
        pytest.importorskip(NEEDS_PACKAGE[case], reason=f"{case}'s task code needs {NEEDS_PACKAGE[case]} (dev extra)")
    if case not in NEEDS_LM_EVAL or importlib.util.find_spec("lm_eval") is not None:
        return
    if not LMEVAL_SITE:
        pytest.skip(f"{case}'s task code imports lm_eval, which is not installed here")
    sys.path.append(LMEVAL_SITE[0])  # after the project's packages: they win on a clash


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
def test_harness_task_files_match_the_harness_per_document(case, smollm2, tmp_path):
    reference = _reference(case)
    _ensure_lm_eval(case)
    task = build_case(case, tmp_path / case)
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
