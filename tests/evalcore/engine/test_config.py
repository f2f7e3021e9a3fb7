"""Task YAML: include inheritance, strict keys, hostile files, bundled tasks."""

from __future__ import annotations

import textwrap

import pytest

from evalcore.engine import TaskIndex, load_config_file
from evalcore.engine.config import GroupConfig, TaskConfig
from evalcore.engine.data import evaluation_docs, load_splits


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def test_include_inherits_and_the_including_file_wins(tmp_path):
    write(tmp_path / "_base_yaml", """
        dataset_path: json
        output_type: multiple_choice
        doc_to_text: "{{q}}"
        doc_to_choice: ["yes", "no"]
        doc_to_target: 0
        num_fewshot: 3
    """)
    config = load_config_file(write(tmp_path / "child.yaml", """
        include: _base_yaml
        task: child
        num_fewshot: 1
    """))
    assert isinstance(config, TaskConfig)
    assert config.get("num_fewshot") == 1
    assert config.get("doc_to_choice") == ["yes", "no"]
    assert "include" not in config.raw


@pytest.mark.parametrize(
    "body, message",
    [
        ("task: t\ndataset_path: json\ndoc_to_text: x\nprocess_results: foo\n", "process_results must be Python code"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\nmystery_key: 1\n", "unsupported key\\(s\\) \\['mystery_key'\\]"),
        ("task: t\ndataset_path: json\ndoc_to_text: !function utils.f\n", "Python code"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\noutput_type: ranking\n", "output_type 'ranking'"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\nfewshot_config: {sampler: balanced}\n", "sampler 'balanced'"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\ngeneration_kwargs: {max_tokens: 5}\n", "max_tokens"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\nmetric_list: [{metric: bleurt}]\n", "metric 'bleurt'"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\noutput_type: generate_until\nmetric_list: [{metric: pass@k, k: [1, 2.5]}]\n", "pass@k's k must be an integer, got 2.5"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\noutput_type: generate_until\nmetric_list: [{metric: pass@k, k: 0}]\n", "pass@k's k must be at least 1, got 0"),
        ("task: t\ndataset_path: json\ndoc_to_text: x\nfilter_list: [{name: a, filter: [{function: mystery}]}]\n", "mystery"),
        ("task: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "mapping"),
        ("task: t\ndataset_path: json\noutput_type: multiple_choice\ndoc_to_text: x\n", "needs doc_to_choice"),
    ],
)
def test_hostile_task_files_fail_with_a_message_naming_the_problem(tmp_path, body, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ValueError, match=message):
        load_config_file(path)


def test_include_cycle_is_reported(tmp_path):
    write(tmp_path / "a.yaml", "include: b.yaml\ntask: a\n")
    write(tmp_path / "b.yaml", "include: a.yaml\n")
    with pytest.raises(ValueError, match="include cycle"):
        load_config_file(tmp_path / "a.yaml")


def test_empty_split_is_an_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    config = load_config_file(write(tmp_path / "t.yaml", f"""
        task: t
        dataset_path: json
        dataset_kwargs: {{data_files: {{test: {tmp_path / 'empty.jsonl'}}}}}
        test_split: test
        doc_to_text: "{{{{q}}}}"
    """))
    with pytest.raises(ValueError, match="has no documents"):
        evaluation_docs(config, load_splits(config))


def test_missing_environment_variable_names_it(tmp_path, monkeypatch):
    monkeypatch.delenv("PODIUM_NOT_SET", raising=False)
    config = load_config_file(write(tmp_path / "t.yaml", """
        task: t
        dataset_path: json
        dataset_kwargs: {data_files: {test: "${PODIUM_NOT_SET}/x.jsonl"}}
        test_split: test
        doc_to_text: q
    """))
    with pytest.raises(ValueError, match="PODIUM_NOT_SET"):
        load_splits(config)


def test_bundled_tasks_are_all_valid_and_mmlu_groups_are_micro_averaged(shared_data, monkeypatch):
    monkeypatch.setenv("PODIUM_DATA_DIR", str(shared_data))
    index = TaskIndex()
    for style in ("mmlu", "mmlu_cloze", "mmlu_hybrid"):
        group = index.groups[style]
        assert isinstance(group, GroupConfig)
        assert len(index.group_members(group)) == 57
        assert all(item["weight_by_size"] is True for item in group.aggregate)
    assert len(index.group_members(index.groups["bbh"])) == 27
    assert {"gsm8k", "humaneval", "humaneval_sampled"} <= set(index.tasks)
    bbh = index.tasks["bbh_cot_fewshot_navigate"]
    assert len(bbh.fewshot_config["samples"]) == 3
    _, docs = evaluation_docs(index.tasks["mmlu_anatomy"], load_splits(index.tasks["mmlu_anatomy"]))
    assert len(docs) == 135 and docs[0]["answer"] in range(4)


def test_user_include_path_with_harness_style_json_task(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text('{"q": "2+2", "a": "4"}\n{"q": "3+3", "a": "6"}\n')
    write(tmp_path / "mine.yaml", f"""
        task: my_arith
        dataset_path: json
        dataset_kwargs:
          data_files:
            test: {data}
        test_split: test
        doc_to_text: "{{{{q}}}} ="
        doc_to_target: a
        output_type: generate_until
    """)
    index = TaskIndex([tmp_path])
    tasks, groups = index.resolve(["my_arith"])
    assert [t.task for t in tasks] == ["my_arith"] and groups == []
    with pytest.raises(ValueError, match="unknown task"):
        index.resolve(["no_such_task"])
