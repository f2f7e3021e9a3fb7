"""The arena's YAML catalogue: valid files sync, hostile ones are refused naming the key."""

from __future__ import annotations

import pytest

from arena.catalogue.sync import catalogue_parse, catalogue_sync
from arena.models import LanguageModel
from tests.conftest import REPO_ROOT

GOOD = """
models:
  - name: m-one
    backend: hf
    model_args: {path: SmolLM2-135M-Instruct, dtype: float32}
    generation: {max_new_tokens: 64, temperature: 0.5}
  - name: m-two
    backend: openai
    model_args: {base_url: "http://127.0.0.1:9/v1", model: x, api_key_env: OPENAI_API_KEY}
    weight: 2
    family: fam
"""


def write(tmp_path, text, name="models.yaml"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


@pytest.mark.django_db
def test_sync_creates_updates_and_retires(tmp_path):
    report = catalogue_sync(catalogue_parse(write(tmp_path, GOOD)))
    assert report.created == ("m-one", "m-two")
    assert LanguageModel.objects.get(name="m-two").weight == 2.0
    smaller = GOOD.split("  - name: m-two")[0]
    report = catalogue_sync(catalogue_parse(write(tmp_path, smaller)))
    assert report.updated == ("m-one",) and report.retired == ("m-two",)
    assert not LanguageModel.objects.get(name="m-two").in_arena  # kept: votes may refer to it


def test_the_demo_file_is_valid():
    entries = catalogue_parse(REPO_ROOT / "config" / "arena_models.demo.yaml")
    assert len(entries) == 3
    assert any("Markdown" in e["system_prompt"] for e in entries)
    assert {e["generation"]["temperature"] for e in entries} == {0.0, 0.9}


HOSTILE = [
    ("models: [", "not valid YAML"),
    (b"\xff\xfe\x00models", "not UTF-8"),
    ("- just a list", "expected a mapping with a 'models' list"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n    colour: red", "colour: unknown key"),
    ("models:\n  - name: a\n    backend: llama\n", "backend: must be one of"),
    ("models:\n  - name: a\n    backend: hf\n", "model_args.path: required"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n    weight: -1", "weight: must be between"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n    weight: .nan", "weight: must be between"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n    weight: 'heavy'", "weight: expected a number"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n    generation: {top_k: 5}", "top_k: unknown"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n    generation: {max_new_tokens: 1.5}", "whole number"),
    ("models:\n  - name: a\n    backend: openai\n    model_args: {base_url: u, api_key: sk-1}", "secrets never go"),
    ("models:\n  - name: '<script>'\n    backend: hf\n    model_args: {path: x}", "name: required"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: x}\n  - name: a\n    backend: hf\n    model_args: {path: y}", "declared twice"),
    ("models:\n  - name: a\n    backend: hf\n    model_args: {path: [1, 2]}", "plain strings or numbers"),
    ("models:\n  - name: a\n    backend: vllm\n", "model_args.path: required for the vllm backend"),
    ("models:\n  - name: a\n    backend: vllm\n    model_args: {path: x, kv_cache_gb: lots}", "kv_cache_gb must be a positive number"),
    ("models:\n  - name: a\n    backend: vllm\n    model_args: {path: x, enforce_eager: sometimes}", "enforce_eager must be true or false"),
    ("models:\n  - name: a\n    backend: vllm\n    model_args: {path: x, gpu_memory_utilization: 2}", "gpu_memory_utilization must be at most 1"),
    ("models:\n  - name: a\n    backend: vllm\n    model_args: {path: x, swap_space: 4}", "unknown vllm engine argument"),
    ("models:\n  - name: a\n    backend: vllm\n    model_args: {path: x, dtype: int4}", "dtype 'int4' is not supported"),
]


def test_a_vllm_model_declares_its_engine_arguments(tmp_path):
    text = "models:\n  - name: v\n    backend: vllm\n    queue: gpu\n    model_args: {path: x, kv_cache_gb: 2, " \
           "max_model_len: 4096, enforce_eager: false, max_num_seqs: 32, tensor_parallel_size: 2}"  # fmt: skip
    (entry,) = catalogue_parse(write(tmp_path, text))
    assert entry["model_args"]["tensor_parallel_size"] == 2 and entry["queue_suffix"] == "gpu"


@pytest.mark.parametrize(("text", "message"), HOSTILE)
def test_hostile_files_are_refused_with_the_key_named(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        catalogue_parse(write(tmp_path, text))


def test_missing_and_oversized_files(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        catalogue_parse(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match="larger than"):
        catalogue_parse(write(tmp_path, "#" * 1_000_001))


@pytest.mark.django_db
def test_a_retirement_made_in_the_admin_that_the_file_clears_is_reported(tmp_path, capsys):
    """The file is the catalogue's truth, so a model it declares without ``retired`` is in the arena; when
    that clears a retirement made in the admin, the sync says so (the command warns), never silently."""
    from django.core.management import call_command

    from arena.catalogue.services import models_retire

    path = write(tmp_path, GOOD)
    catalogue_sync(catalogue_parse(path))
    models_retire([LanguageModel.objects.get(name="m-two").pk], reason="endpoint withdrawn")
    assert LanguageModel.objects.get(name="m-two").retired_at is not None
    report = catalogue_sync(catalogue_parse(path))
    assert report.returned == ("m-two (was retired: endpoint withdrawn)",) and report.retired == ()
    assert LanguageModel.objects.get(name="m-two").retired_at is None
    assert catalogue_sync(catalogue_parse(path)).returned == ()  # nothing to bring back the second time
    models_retire([LanguageModel.objects.get(name="m-one").pk], reason="superseded")
    call_command("arena_models_sync", str(path))
    assert "back in the arena (the file declares them without retired:): m-one (was retired: superseded)" in \
        capsys.readouterr().err
