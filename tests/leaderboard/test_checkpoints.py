"""Checkpoint validation without Django: real tiny checkpoints pass, hostile files are refused."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
from pathlib import Path

import pytest

from evalcore.models.hf import hash_files
from leaderboard.submissions import checkpoint_io, file_rules
from leaderboard.submissions import checkpoints as ck
from tests.leaderboard.checkpoint_factory import parameter_count

LIMITS = ck.Limits(
    max_parameters=10_000_000, max_bytes=100_000_000, max_files=20, architectures=("LlamaForCausalLM",)
)


def files_of(folder: Path) -> list[ck.CheckpointFile]:
    return ck.folder_files(folder, root=folder)


def memory_file(name: str, data: bytes) -> ck.CheckpointFile:
    return ck.CheckpointFile(name, len(data), lambda: io.BytesIO(data))


def replaced(folder: Path, name: str, data: bytes | None) -> list[ck.CheckpointFile]:
    """The folder's files with ``name`` replaced by ``data`` (or removed when None)."""
    kept = [f for f in files_of(folder) if f.name != name]
    return kept + ([memory_file(name, data)] if data is not None else [])


def inspect(files, **kwargs) -> ck.CheckpointReport:
    return ck.inspect_checkpoint(files, limits=kwargs.pop("limits", LIMITS), want_chat_template=kwargs.pop("chat", False))


def safetensors_bytes(header: dict, data: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_real_checkpoint_passes_with_parameters_from_headers(tiny_dir):
    report = inspect(files_of(tiny_dir), chat=True)
    assert report.errors == []
    assert report.architecture == "LlamaForCausalLM"
    assert report.parameter_count == parameter_count(tiny_dir)  # what the safetensors library reads
    assert report.has_chat_template  # chat_template.jinja
    assert report.total_bytes == sum(p.stat().st_size for p in tiny_dir.iterdir())


def test_sharded_checkpoint_needs_and_checks_its_index(make_checkpoint):
    sharded = make_checkpoint(max_shard_size="1MB")
    shards = sorted(p.name for p in sharded.glob("*.safetensors"))
    assert len(shards) > 1
    assert inspect(files_of(sharded)).errors == []
    assert any("index" in e for e in inspect(replaced(sharded, ck.INDEX, None)).errors)
    index = json.loads((sharded / ck.INDEX).read_text())
    tensor = next(iter(index["weight_map"]))
    index["weight_map"][tensor] = shards[-1] if index["weight_map"][tensor] != shards[-1] else shards[0]
    errors = inspect(replaced(sharded, ck.INDEX, json.dumps(index).encode())).errors
    assert any("wrong shard" in e for e in errors)
    missing = [f for f in files_of(sharded) if f.name != shards[0]]
    assert any("not here" in e for e in inspect(missing).errors)


def test_pickle_renamed_safetensors_is_refused_without_unpickling(tiny_dir, tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps({"weight": Exploit()}, protocol=4)
    errors = inspect(replaced(tiny_dir, "model.safetensors", payload)).errors
    assert any("not a safetensors file" in e and "header length" in e for e in errors), errors
    assert not marker.exists()


def test_header_claiming_a_huge_tensor_is_refused(tiny_dir):
    huge = {"w": {"dtype": "F32", "shape": [1_000_000, 1_000_000], "data_offsets": [0, 4_000_000_000_000]}}
    errors = inspect(replaced(tiny_dir, "model.safetensors", safetensors_bytes(huge, b"\0" * 16))).errors
    assert any("claims 4000000000000 bytes" in e for e in errors), errors


@pytest.mark.parametrize(
    "data, message",
    [
        (struct.pack("<Q", 2**62) + b"{}", "header length"),  # absurd length: never allocated
        (b"\x01\x02", "shorter than"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not UTF-8 JSON"),
        (safetensors_bytes({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 8), "does not match"),
        (safetensors_bytes({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8), "gaps"),
        (safetensors_bytes({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 12), "holds 12"),
        (safetensors_bytes({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}}, b"\0"), "unknown dtype"),
        (safetensors_bytes({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4), "shape"),
        (safetensors_bytes({"w": {"dtype": "F32", "shape": [1]}}, b"\0" * 4), "exactly dtype"),
        (safetensors_bytes([1, 2]), "not a JSON object"),
    ],
)
def test_malformed_safetensors_headers(data, message):
    with pytest.raises(ck.CheckpointError, match=message):
        ck.read_safetensors_header(io.BytesIO(data), len(data), name="model.safetensors")


@pytest.mark.parametrize(
    "name, message",
    [
        ("../model.safetensors", "path separator"),
        ("weights/model.safetensors", "path separator"),
        ("..\\config.json", "path separator"),
        ("model\x00.safetensors", "control characters"),
        ("pytorch_model.bin", "only safetensors"),
        ("model.pt", "only safetensors"),
        ("optimizer.pkl", "only safetensors"),
        ("model.ckpt", "only safetensors"),
        ("modeling_custom.py", "code"),
        ("archive.zip", "not a checkpoint file"),
    ],
)
def test_file_names(name, message):
    assert message in file_rules.file_name_problem(name)


def test_pickled_weights_beside_safetensors_are_refused(tiny_dir):
    errors = inspect([*files_of(tiny_dir), memory_file("pytorch_model.bin", b"\x80\x04K\x01.")]).errors
    assert any("only safetensors" in e for e in errors)


def test_config_with_auto_map_is_refused(tiny_dir):
    config = json.loads((tiny_dir / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    errors = inspect(replaced(tiny_dir, "config.json", json.dumps(config).encode())).errors
    assert any("auto_map" in e for e in errors)
    tokenizer = json.loads((tiny_dir / "tokenizer_config.json").read_text())
    tokenizer["auto_map"] = {"AutoTokenizer": ["tok.EvilTokenizer", None]}
    errors = inspect(replaced(tiny_dir, "tokenizer_config.json", json.dumps(tokenizer).encode())).errors
    assert any("custom tokenizer code" in e for e in errors)


@pytest.mark.parametrize(
    "data, message",
    [
        ('{"architectures": ["LlamaForCausalLM"], "name": "caf\u00e9"}'.encode("latin-1"), "not UTF-8"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"architectures": ["EvilForCausalLM"]}', "not supported"),
        (b'{"architectures": []}', "exactly one architecture"),
        (b'{"model_type": "llama"}', "exactly one architecture"),
    ],
)
def test_bad_configs(tiny_dir, data, message):
    errors = inspect(replaced(tiny_dir, "config.json", data)).errors
    assert any(message in e for e in errors), errors


def test_missing_pieces(tiny_dir):
    assert any("config.json is missing" in e for e in inspect(replaced(tiny_dir, "config.json", None)).errors)
    assert any("No tokenizer" in e for e in inspect(replaced(tiny_dir, "tokenizer.json", None)).errors)
    assert any("No *.safetensors" in e for e in inspect(replaced(tiny_dir, "model.safetensors", None)).errors)
    assert "No files" in inspect([]).errors[0]


def test_limits_on_parameters_bytes_and_files(tiny_dir):
    files = files_of(tiny_dir)
    small = ck.Limits(max_parameters=1000, max_bytes=1000, max_files=2, architectures=LIMITS.architectures)
    errors = inspect(files, limits=small).errors
    assert any("Too many files" in e for e in errors)
    assert any("at most 1000 are accepted" in e and "bytes" in e for e in errors)
    few = ck.Limits(max_parameters=1000, max_bytes=10**9, max_files=20, architectures=LIMITS.architectures)
    assert any("parameters; at most 1,000" in e for e in inspect(files, limits=few).errors)


def test_chat_template_required_only_when_asked(tiny_dir):
    without = replaced(tiny_dir, "chat_template.jinja", None)
    assert inspect(without).errors == []
    assert any("chat template" in e for e in inspect(without, chat=True).errors)
    tokenizer = json.loads((tiny_dir / "tokenizer_config.json").read_text())
    tokenizer["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
    inline = [f for f in without if f.name != "tokenizer_config.json"]
    inline.append(memory_file("tokenizer_config.json", json.dumps(tokenizer).encode()))
    assert inspect(inline, chat=True).errors == []


def test_duplicate_names_are_refused(tiny_dir):
    files = files_of(tiny_dir)
    assert any("appears twice" in e for e in inspect([*files, files[0]]).errors)


def test_store_folder_stays_inside_the_store(tmp_path, tiny_dir):
    store = tmp_path / "store"
    (store / "org").mkdir(parents=True)
    shutil.copytree(tiny_dir, store / "org" / "tiny")
    assert ck.store_folder(store, "org/tiny") == (store / "org" / "tiny").resolve()
    outside = tmp_path / "outside"
    shutil.copytree(tiny_dir, outside)
    (store / "escape").symlink_to(outside)
    for path, message in [("../outside", "without '..'"), ("/etc", "without '..'"), ("org/../../outside", "'..'"),
                          ("escape", "outside the model store"), ("nothing", "does not exist"),
                          ("org/tiny/config.json", "not a folder")]:  # fmt: skip
        with pytest.raises(ck.CheckpointError, match=message):
            ck.store_folder(store, path)
    with pytest.raises(ck.CheckpointError, match="No shared model store"):
        ck.store_folder("", "org/tiny")


def test_store_file_links_must_stay_inside_the_store(tmp_path, tiny_dir):
    store = tmp_path / "store"
    shutil.copytree(tiny_dir, store / "tiny")
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    (store / "tiny" / "generation_config.json").unlink()
    (store / "tiny" / "generation_config.json").symlink_to(secret)
    with pytest.raises(ck.CheckpointError, match="leads outside"):
        ck.folder_files(store / "tiny", root=store)


def test_weight_hash_matches_the_backend_and_the_copy(tiny_dir, make_checkpoint, tmp_path):
    files = files_of(tiny_dir)
    expected = hash_files(sorted(tiny_dir.glob("*.safetensors")))
    assert checkpoint_io.hash_weights(files) == expected
    assert checkpoint_io.copy_and_hash(files, tmp_path / "copy") == expected
    for original in tiny_dir.iterdir():
        assert (tmp_path / "copy" / original.name).read_bytes() == original.read_bytes()
    assert checkpoint_io.hash_weights(files_of(make_checkpoint(seed=1))) != expected
