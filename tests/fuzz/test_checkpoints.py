"""Safetensors headers, checkpoint JSON files and whole checkpoints (in memory): a result, a report
with errors, or a CheckpointError (a ValueError) saying what is wrong; nothing else."""

from __future__ import annotations

import io
import json

from hypothesis import example, given
from hypothesis import strategies as st

from leaderboard.submissions.checkpoints import (
    DTYPE_BYTES,
    CheckpointError,
    CheckpointFile,
    Limits,
    inspect_checkpoint,
    read_json_object,
    read_safetensors_header,
)
from tests.fuzz.strategies import documented, json_values, scalars

DIM = st.integers(min_value=-1, max_value=2**60) | st.sampled_from([0, 1, 2, 3, 4, True, 2.0, "2", None])
FIELDS = {
    "dtype": st.sampled_from(sorted(DTYPE_BYTES)) | scalars | json_values(),
    "shape": st.lists(DIM, max_size=20) | json_values(),
    "data_offsets": st.lists(DIM, min_size=0, max_size=3) | json_values(),
}
# Complete entries with wrong values, and entries with missing or extra keys.
ENTRY = st.fixed_dictionaries(FIELDS) | st.fixed_dictionaries({}, optional={**FIELDS, "extra": scalars})
HEADERS = st.dictionaries(st.sampled_from(["w", "b", "__metadata__", ""]) | st.text(max_size=6),
                          ENTRY | json_values(), max_size=4)  # fmt: skip


@st.composite
def safetensors_files(draw) -> bytes:
    """An 8-byte length, a header (JSON object, other JSON or bytes) and some data."""
    header = draw(HEADERS.map(lambda h: json.dumps(h).encode()) | json_values().map(lambda v: json.dumps(v).encode())
                  | st.binary(max_size=40))  # fmt: skip
    length = draw(st.just(len(header)) | st.integers(min_value=0, max_value=2**64 - 1))
    data = draw(st.binary(max_size=64))
    return length.to_bytes(8, "little") + header + data


def _file(header: dict, data: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw + data


def _header(data: bytes):
    return documented(lambda: read_safetensors_header(io.BytesIO(data), len(data), name="model.safetensors"),
                      errors=(CheckpointError,))  # fmt: skip


@given(safetensors_files() | st.binary(max_size=80))
def test_safetensors_file(data):
    _header(data)


@given(HEADERS, st.binary(max_size=64))
@example({"w": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)  # was TypeError
@example({"w": {"dtype": {"F32": 1}, "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
def test_safetensors_header(header, data):
    _header(_file(header, data))


@given(json_values().map(lambda v: json.dumps(v).encode()) | st.binary(max_size=80) | st.sampled_from(
    [b"[" * 100_000, b'{"a":' * 5000, b"1" * 5000, b"\xef\xbb\xbf{}", b'{"a": NaN}', b'"\\ud800"']))  # fmt: skip
def test_json_object(data):
    documented(lambda: read_json_object(io.BytesIO(data), len(data), name="config.json"), errors=(CheckpointError,))


NAMES = ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors", "model-1.safetensors",
         "model.safetensors.index.json", "chat_template.json", "chat_template.jinja", "x.bin", "../a", ".hidden",
         "a/b.json", ""]  # fmt: skip
JSON_FILES = st.fixed_dictionaries(
    {},
    optional={
        "architectures": st.just(["LlamaForCausalLM"]) | json_values(),
        "weight_map": st.dictionaries(st.sampled_from(["w", "b"]), st.sampled_from(NAMES) | scalars) | json_values(),
        "chat_template": scalars | json_values(),
        "auto_map": scalars,
    },
).map(lambda d: json.dumps(d).encode())
CONTENTS = JSON_FILES | safetensors_files() | st.binary(max_size=40)
LIMITS = Limits(max_parameters=10**6, max_bytes=10**6, max_files=8, architectures=("LlamaForCausalLM",))


@given(st.lists(st.tuples(st.sampled_from(NAMES) | st.text(max_size=8), CONTENTS), max_size=7), st.booleans())
def test_inspect_checkpoint(files, want_chat_template):
    checkpoint = [CheckpointFile(name, len(data), lambda data=data: io.BytesIO(data)) for name, data in files]
    report = inspect_checkpoint(checkpoint, limits=LIMITS, want_chat_template=want_chat_template)
    assert all(isinstance(e, str) and e for e in report.errors)
    if report.ok:
        assert report.architecture == "LlamaForCausalLM" and report.weight_files
