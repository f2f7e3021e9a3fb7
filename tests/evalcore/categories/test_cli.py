"""``python -m evalcore categorize``: one JSON line per prompt with the real SmolLM2, a re-run served from
the cache, and hostile prompt files refused before any model loads, leaving earlier outputs as they were."""

from __future__ import annotations

import json

import pytest
import yaml

from evalcore.cli import main
from tests.evalcore.categories.conftest import MIXED, PROMPTS


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [json.dumps({"id": f"p{k}", "prompt": p, "source": "test"}) for k, p in enumerate(PROMPTS[:3])]
    path.write_text("\n".join(lines) + "\n\n" + json.dumps({"prompt": PROMPTS[3]}) + "\n", encoding="utf-8")
    return path


def _run(prompts, out, smollm2_dir, *protocols) -> int:
    args = ["categorize", str(prompts), "--model", "hf", "--model-args", f"path={smollm2_dir},dtype=float32",
            "--out", str(out)]  # fmt: skip
    for protocol in protocols:
        args += ["--protocol", str(protocol)]
    return main(args)


def test_categorize_writes_one_line_per_prompt_and_reruns_from_the_cache(
    prompt_file, tmp_path, smollm2_dir, capsys
):
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(yaml.safe_dump(MIXED), encoding="utf-8")
    out = tmp_path / "out"
    assert _run(prompt_file, out, smollm2_dir, mixed, "coding") == 0
    rows = [json.loads(line) for line in (out / "tags.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["p0", "p1", "p2", "5"]  # the line number where no id is given
    assert rows[0]["extra"] == {"source": "test"}
    for row in rows:
        assert set(row["tags"]) == {"mentions_code", "coding"}
        tag = row["tags"]["coding"]
        assert tag["status"] == "ok" and tag["protocol"] == "coding" and tag["protocol_version"] == "1"
        assert tag["tagger"].startswith("hf:") and isinstance(tag["value"], bool)
    summary = json.loads((out / "summary.json").read_text())
    counts = summary["categories"]["mentions_code"]
    assert counts["in"] + counts["out"] == 4 and counts["cached"] == 0 and counts["failed"] == 0
    first = (out / "tags.jsonl").read_text()
    capsys.readouterr()
    assert _run(prompt_file, out, smollm2_dir, mixed, "coding") == 0
    assert "(4 from the cache)" in capsys.readouterr().out
    assert (out / "tags.jsonl").read_text() == first


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"prompt": "fine"}\nnot json\n', "line 2 is not valid JSON"),
        (b'{"prompt": "fine"}\n["a list"]\n', "line 2 must be a JSON object"),
        (b'{"text": "no prompt key"}\n', "line 1 needs a non-empty string 'prompt'"),
        (b'{"prompt": "   "}\n', "line 1 needs a non-empty string 'prompt'"),
        (b'{"prompt": 5}\n', "line 1 needs a non-empty string 'prompt'"),
        (b'{"prompt": "a", "id": 1}\n{"prompt": "b", "id": "1"}\n', "line 2: id '1' appears twice"),
        (b'{"prompt": "a", "id": [1]}\n', "'id' must be a string or a whole number"),
        (b'{"prompt": "\\u0000 nul"}\n', "NUL character"),
        (b'{"prompt": "\xff\xfe"}\n', "line 1 is not UTF-8 text"),
        (b'{"prompt": ' + b"[" * 100 + b"]" * 100 + b"}\n", "nests deeper than"),
        (b"\n\n", "holds no prompts"),
    ],
    ids=[
        "not json",
        "not an object",
        "no prompt",
        "blank prompt",
        "number prompt",
        "repeated id",
        "list id",
        "nul",
        "not utf-8",
        "deep nesting",
        "empty",
    ],
)
def test_hostile_prompt_files_are_refused_before_the_model_loads(tmp_path, content, message, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_bytes(content)
    out = tmp_path / "out"
    out.mkdir()
    (out / "tags.jsonl").write_text("earlier results\n")
    # A model path that does not exist: the refusal must come before the model is loaded.
    assert main(["categorize", str(prompts), "--protocol", "coding", "--model", "hf", "--model-args",
                 f"path={tmp_path}/no-model", "--out", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert (out / "tags.jsonl").read_text() == "earlier results\n"  # nothing lost


def test_hostile_options_and_protocols_are_refused(tmp_path, prompt_file, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\ncategory: Overall\nuser: '{prompt}'\nverdict: {method: logprob, criteria: [{name: a}]}\n"
    )
    cases = [
        (["--protocol", str(bad)], "must be 1 to 48 of a-z"),
        (["--protocol", "coding", "--protocol", "coding"], "tag the same category"),
        (["--protocol", "nope"], "neither a file nor a bundled protocol"),
        (["--protocol", "coding", "--limit", "0"], "--limit must be at least 1"),
    ]
    for extra, message in cases:
        code = main(["categorize", str(prompt_file), "--model", "hf", "--model-args", f"path={tmp_path}/none",
                     "--out", str(tmp_path / "o"), *extra])  # fmt: skip
        assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
