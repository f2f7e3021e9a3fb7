"""Harness semantics the engine follows: trusted task code, filters, metrics, data options, results keys."""

import json
import textwrap

import pytest

from evalcore.engine import TaskIndex, evaluate, load_config_file, write_run
from evalcore.engine.corpus import binary_f1, matthews, sacrebleu_score
from evalcore.engine.data import load_splits
from evalcore.engine.filters import pipelines
from evalcore.engine.results import read_results
from evalcore.models.base import Backend, GenerationResult, LoglikelihoodResult, ModelIdentity


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


class Scripted(Backend):
    """Answers generation requests from a table (prompt -> text) and scores choices by length."""

    def __init__(self, answers=None):
        self.answers = answers or {}

    @property
    def identity(self):
        return ModelIdentity("scripted", "scripted", "0" * 64, "none", "1")

    def stream_chat(self, messages, params):
        raise NotImplementedError

    def loglikelihood(self, requests, progress=None):
        return [LoglikelihoodResult(-float(len(r.continuation)), False) for r in requests]

    def loglikelihood_rolling(self, requests, progress=None):
        raise NotImplementedError

    def generate_until(self, requests, progress=None):
        return [GenerationResult(self.answers[r.context], 1, "stop") for r in requests]


@pytest.fixture
def coded_task(tmp_path):
    folder = tmp_path / "coded"
    folder.mkdir()
    write(folder / "data.jsonl", '{"q": "one", "a": "1"}\n{"q": "two", "a": "2"}\n{"q": "three", "a": "9"}\n')
    write(folder / "utils.py", '''
        def process_docs(dataset):
            return dataset.map(lambda doc: {"question": doc["q"].upper()})

        def score(doc, results):
            return {"hit": float(results[0].strip() == doc["a"]), "length": len(results[0])}

        def last_char(resps, docs):
            return [[r[-1:] for r in rs] for rs in resps]
    ''')
    write(folder / "coded.yaml", f'''
        task: coded
        dataset_path: json
        dataset_kwargs: {{data_files: {{test: {folder / "data.jsonl"}}}}}
        test_split: test
        process_docs: !function utils.process_docs
        doc_to_text: "{{{{question}}}}?"
        doc_to_target: a
        process_results: !function utils.score
        filter_list:
          - name: last
            filter: [{{function: custom, filter_fn: !function utils.last_char}}, {{function: take_first}}]
        metric_list:
          - {{metric: hit, aggregation: mean, higher_is_better: true}}
          - {{metric: length, aggregation: median, higher_is_better: false}}
    ''')
    return folder


def test_function_tags_run_only_from_trusted_folders(coded_task):
    with pytest.warns(UserWarning, match="coded.yaml.*trust-task-code"):
        untrusted = TaskIndex([coded_task], bundled=False)
    with pytest.raises(ValueError, match="cannot load.*Python code that Podium runs only from trusted"):
        untrusted.resolve(["coded"])
    index = TaskIndex([coded_task], bundled=False, trust_task_code=True)
    tasks, _ = index.resolve(["coded"])
    answers = {"ONE?": "it is 1", "TWO?": "so 3", "THREE?": "9"}
    run = evaluate(Scripted(answers), tasks)
    assert [r["prompt"] for r in run.tasks["coded"].records] == ["ONE?", "TWO?", "THREE?"]
    assert run.results["coded"]["hit,last"].value == pytest.approx(2 / 3)
    assert run.results["coded"]["length,last"].value == 1.0
    assert "sha256:" in json.dumps(tasks[0].raw, default=str)  # the code's hash is part of the protocol


def test_one_broken_file_is_skipped_with_a_warning_and_named_when_asked_for(tmp_path):
    write(tmp_path / "good.yaml", "task: good\ndataset_path: json\ndoc_to_text: q\n")
    write(tmp_path / "bad.yaml", "task: bad\ndataset_path: json\ndoc_to_text: q\noutput_type: ranking\n")
    with pytest.warns(UserWarning, match="bad.yaml.*ranking"):
        index = TaskIndex([tmp_path], bundled=False)
    assert index.resolve(["good"])[0][0].task == "good"
    assert str(tmp_path / "bad.yaml") in index.skipped
    with pytest.raises(ValueError, match="task 'bad' cannot load .*bad.yaml.*ranking"):
        index.resolve(["bad"])


def test_results_json_uses_the_harness_keys_and_reads_back(tmp_path):
    data = write(tmp_path / "d.jsonl", '{"q": "a", "c": ["x", "yy"], "g": 0}\n{"q": "b", "c": ["xx", "y"], "g": 0}\n')
    write(tmp_path / "mc.yaml", f"""
        task: mc
        dataset_path: json
        dataset_kwargs: {{data_files: {{test: {data}}}}}
        test_split: test
        output_type: multiple_choice
        doc_to_text: q
        doc_to_choice: c
        doc_to_target: g
        metric_list: [{{metric: acc}}, {{metric: f1}}, {{metric: mcc}}]
    """)
    run = evaluate(Scripted(), TaskIndex([tmp_path], bundled=False).resolve(["mc"])[0])
    data = json.loads(write_run(run, tmp_path / "out").read_text())
    block = data["results"]["mc"]
    # 1 of 2 right: the mid-p interval is [0.025, 0.975] (P(X=2) + P(X=1)/2 = p^2 + p(1-p) = p at the lower
    # bound), symmetric; its standard error is half its width / 1.96 (the harness's plug-in would be 0.5).
    assert block["acc,none"] == 0.5 and block["acc_stderr,none"] == pytest.approx(0.95 / 2 / 1.959964, abs=1e-4)
    assert block["alias"] == "mc" and data["n-samples"]["mc"]["effective"] == 2
    assert read_results(data)["mc"]["acc"]["n"] == 2
    old_layout = {"results": {"mc": {"acc": {"value": 0.5, "stderr": 0.5, "n": 2}}}}
    assert read_results(old_layout)["mc"]["acc"]["n"] == 2
    harness_layout = {"results": {"mc": {"alias": "mc", "acc,none": 0.5, "acc_stderr,none": "N/A"}}}
    assert read_results(harness_layout) == {"mc": {"acc": {"value": 0.5, "stderr": None}}}


def test_harness_filters():
    def run(steps, responses, doc=None):
        return dict(pipelines([{"name": "p", "filter": steps}]))["p"](responses, doc or {})

    assert run([{"function": "remove_whitespace"}], ["  B \n", " A"]) == ["B", "A"]
    assert run([{"function": "take_first_k", "k": 2}], ["a", "b", "c"]) == ["a", "b"]
    assert run([{"function": "map", "mapping_dict": {"yes": 1}, "default_value": 0}], ["yes", "no"]) == [1, 0]
    mcr = [{"function": "multi_choice_regex", "regex_pattern": r"(\([A-D]\))", "group_select": -1,
            "ignore_case": True, "ignore_punctuation": True}]  # fmt: skip
    doc = {"choices": ["Guilty", "Guilty of Romance", "Paris"]}
    assert run(mcr, ["I pick (B) then (C)", "it is guilty of romance!", "Answer: A", "no idea"], doc) == [
        "(C)", "(B)", "(A)", "[invalid]",
    ]  # fmt: skip
    assert run([{"function": "regex_pos"}], ["[('The', 'DET'), ('cat', 'NOUN')]", "none"]) == [["DET", "NOUN"], ["invalid"]]
    assert run([{"function": "format_span"}], ["Person: Ann, Bob $$ Location: none"]) == ["per: ann $ per: bob"]


def test_corpus_metrics_match_reference_values():
    pairs = [[1, 1], [1, 0], [0, 0], [0, 1], [1, 1]]
    assert binary_f1(pairs) == pytest.approx(2 / 3)  # tp=2, fp=1, fn=1 (scikit-learn f1_score)
    assert matthews(pairs) == pytest.approx(1 / 6)  # (tp*tn - fp*fn) / sqrt(...) = (2-1)/sqrt(3*3*2*2)
    assert sacrebleu_score("bleu", [["the cat sat on the mat", "the cat sat on the mat"]]) == pytest.approx(100.0)
    assert sacrebleu_score("ter", [["a b c d", "a b c e"]]) == pytest.approx(25.0)


def test_csv_options_parquet_and_include_lists(tmp_path):
    write(tmp_path / "rows.csv", "7;x\n8;y\n")
    write(tmp_path / "base_yaml", "dataset_path: csv\ntest_split: train\n")
    write(tmp_path / "more_yaml", "doc_to_text: '{{word}}'\n")
    config = load_config_file(write(tmp_path / "t.yaml", f"""
        task: t
        include: [base_yaml, more_yaml]
        dataset_kwargs: {{data_files: {tmp_path / "rows.csv"}, sep: ";", column_names: [n, word]}}
    """))
    assert load_splits(config)["train"] == [{"n": 7, "word": "x"}, {"n": 8, "word": "y"}]
    pyarrow = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pyarrow.write_table(pa.table({"q": ["a", "b"], "n": [1, 2]}), tmp_path / "d.parquet")
    config = load_config_file(write(tmp_path / "p.yaml", f"""
        task: p
        dataset_path: parquet
        dataset_kwargs: {{data_files: {{test: {tmp_path / "d.parquet"}}}}}
        test_split: test
        doc_to_text: q
    """))
    assert load_splits(config)["test"] == [{"q": "a", "n": 1}, {"q": "b", "n": 2}]


def test_groups_with_inline_tasks_and_tags(tmp_path):
    data = write(tmp_path / "d.jsonl", '{"q": "a", "c": ["x", "yy"], "g": 0}\n')
    write(tmp_path / "t.yaml", f"""
        task: base_mc
        tag: my_tag
        dataset_path: json
        dataset_kwargs: {{data_files: {{test: {data}}}}}
        test_split: test
        output_type: multiple_choice
        doc_to_text: q
        doc_to_choice: c
        doc_to_target: g
    """)
    write(tmp_path / "g.yaml", f"""
        group: suite
        task:
          - my_tag
          - task: inline_mc
            dataset_path: json
            dataset_kwargs: {{data_files: {{test: {data}}}}}
            test_split: test
            output_type: multiple_choice
            doc_to_text: q
            doc_to_choice: ["yy", "x"]
            doc_to_target: 1
          - group: sub
            task: [base_mc]
            aggregate_metric_list: [{{metric: acc}}]
        aggregate_metric_list: [{{metric: acc, weight_by_size: true}}]
    """)
    index = TaskIndex([tmp_path], bundled=False)
    tasks, groups = index.resolve(["suite"])
    assert sorted(t.task for t in tasks) == ["base_mc", "suite::inline_mc"]
    run = evaluate(Scripted(), tasks, groups=groups, index=index)
    assert run.results["suite"]["acc"].value == 1.0 and run.results["suite::sub"]["acc"].n == 1


def test_unsafe_code_tasks_score_only_with_the_jailed_pass_at_k(tmp_path):
    write(tmp_path / "utils.py", "def score(doc, results):\n    return {'passed': 1.0}\n")
    base = "task: code\ndataset_path: json\ndoc_to_text: q\nunsafe_code: true\n"
    write(tmp_path / "own.yaml", base + "process_results: !function utils.score\nmetric_list: [{metric: passed}]\n")
    with pytest.raises(ValueError, match="outside the jail"):
        load_config_file(tmp_path / "own.yaml", trusted=True)
    write(tmp_path / "mc.yaml", base + "output_type: multiple_choice\ndoc_to_choice: [a, b]\n")
    with pytest.raises(ValueError, match="generation tasks whose programs run in the jail"):
        load_config_file(tmp_path / "mc.yaml", trusted=True)
    jailed = load_config_file(write(tmp_path / "ok.yaml", base + "metric_list: [{metric: pass@k, k: [1]}]\n"))
    assert jailed.get("unsafe_code") is True


def test_fewshot_samples_from_task_code(tmp_path):
    write(tmp_path / "utils.py", "def shots():\n    return [{'q': 'x', 'a': 'X'}, {'q': 'y', 'a': 'Y'}]\n")
    data = write(tmp_path / "d.jsonl", '{"q": "z", "a": "Z"}\n')
    write(tmp_path / "t.yaml", f"""
        task: upper
        dataset_path: json
        dataset_kwargs: {{data_files: {{test: {data}}}}}
        test_split: test
        doc_to_text: "{{{{q}}}}:"
        doc_to_target: a
        num_fewshot: 2
        fewshot_config: {{sampler: first_n, samples: !function utils.shots}}
        generation_kwargs: {{until: ["\\n"]}}
    """)
    tasks, _ = TaskIndex([tmp_path], bundled=False, trust_task_code=True).resolve(["upper"])
    run = evaluate(Scripted({"x: X\n\ny: Y\n\nz:": " Z"}), tasks)
    assert run.tasks["upper"].records[0]["prompt"] == "x: X\n\ny: Y\n\nz:"


def test_hub_data_sets_fail_offline_with_a_message(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: nothing to answer from
    config = load_config_file(write(tmp_path / "hub.yaml", "task: hub\ndataset_path: podium-test/no-such-set\ndoc_to_text: q\n"))
    with pytest.raises(ValueError, match="hub data set 'podium-test/no-such-set' could not be loaded.*offline, use"):
        load_splits(config)
