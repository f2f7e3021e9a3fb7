"""The file-list rules are one source for the server and the browser: the same lists, hostile ones
included, get the same messages from leaderboard/submissions/file_rules.py and from
static/js/checkpoint-rules.js running in headless Chromium (no server needed). And the vendored
tus-js-client is the file its README names."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import zlib
from pathlib import Path

import pytest

from leaderboard.submissions import file_rules
from podium_client.upload import chunk_checksum

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TUS_SHA256 = "8cbb1b63fccc3bba0ae73ad1deb160ce046c3750851d0c3e94921ae3ef070eb8"
MAX_FILES, MAX_BYTES = 8, 10_000
GOOD = [("config.json", 600), ("tokenizer.json", 2000), ("tokenizer_config.json", 300), ("model.safetensors", 5000)]

NAMES = [
    "config.json", "model.safetensors", "MODEL.SafeTensors", "pytorch_model.bin", "model.PT", "optimizer.pkl",
    "x.npy", "modeling_evil.py", "run.sh", "archive.zip", "README.md", ".gitattributes", "", " ", "\t",
    "\ufeff", "\ufeff \u3000", "\xa0", "\x85weights.safetensors", "a\x00b.json", "a\x7f.json", "a\nb.json",
    "../model.safetensors", "sub/model.safetensors", "..\\config.json", "model..safetensors", "..", ".",
    "modèle.safetensors", "模型.safetensors", "\U0001f600.json", "\U0001f600\x01.json", "a\\b\x1f.json",
    "{name}.bin", "{count}.txt", "x" * 195 + ".json", "x" * 196 + ".json", "\U0001f600" * 196 + ".json",
    "é" * 150 + "\x00.json", "\ud800.json", "K.SAFETENSORS", "tokenizer.model", "merges.txt",
    "chat_template.jinja", "vocab.json", "config.JSON", "İ.safetensors",
    "model\u202enosj.safetensors", "a\u2066b.json", "a\u200fb.json", "a\u061cb.json", "a\u200db.json",
]  # fmt: skip

LISTS = {
    "good": GOOD,
    "nothing": [],
    "too many": GOOD + [(f"extra{i}.txt", 1) for i in range(6)],
    "too large": GOOD + [("model-2.safetensors", 9000), (file_rules.INDEX, 100)],
    "pickle beside safetensors": GOOD + [("pytorch_model.bin", 800)],
    "no config": GOOD[1:],
    "no tokenizer": [GOOD[0], GOOD[2], GOOD[3]],
    "only config": [GOOD[0]],
    "shards without index": GOOD + [("model-2.safetensors", 10)],
    "shards with index": GOOD + [("model-2.safetensors", 10), (file_rules.INDEX, 10)],
    "twice": GOOD + [("config.json", 600)],
    "empty file": GOOD + [("merges.txt", 0)],
    "bad names and too many": [(n, 1) for n in NAMES[:12]],
    "upper-case config": [("Config.json", 600), *GOOD[1:]],
}


def python_answers() -> dict:
    names = {repr(n): file_rules.file_name_problem(n) for n in NAMES}
    lists = {k: file_rules.file_list_problems(v, max_files=MAX_FILES, max_bytes=MAX_BYTES) for k, v in LISTS.items()}
    return {"names": names, "lists": lists}


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        page.set_content("<!doctype html><title>rules</title>")
        page.add_script_tag(path=str(ROOT / "static/js/checkpoint-rules.js"))
        page.add_script_tag(path=str(ROOT / "static/js/crc32.js"))
        yield page
        browser.close()


def test_browser_and_server_say_the_same_about_every_name_and_list(page):
    rules = file_rules.browser_rules(max_files=MAX_FILES, max_bytes=MAX_BYTES)
    browser = page.evaluate(
        """([rules, names, lists]) => {
            const R = window.PodiumCheckpointRules;
            const out = {names: {}, lists: {}};
            names.forEach(([key, name]) => { out.names[key] = R.fileNameProblem(rules, name); });
            Object.entries(lists).forEach(([key, files]) => {
                out.lists[key] = R.fileListProblems(rules, files.map(([name, size]) => ({name, size})));
            });
            return out;
        }""",
        [rules, [[repr(n), n] for n in NAMES], {k: [list(f) for f in v] for k, v in LISTS.items()}],
    )
    expected = python_answers()
    assert browser["lists"] == expected["lists"]
    assert browser["names"] == expected["names"]


def test_the_rules_refuse_what_they_should():
    answers = python_answers()
    assert answers["lists"]["good"] == [] and answers["lists"]["shards with index"] == []
    assert answers["lists"]["no config"] == ["config.json is missing."]
    assert answers["lists"]["no tokenizer"][0].startswith("No tokenizer")
    assert answers["lists"]["shards without index"] == [
        "2 safetensors shards need model.safetensors.index.json to say which tensor is in which shard."
    ]
    assert "only safetensors weights" in answers["lists"]["pickle beside safetensors"][0]
    assert answers["lists"]["too large"] == ["The checkpoint is 17000 bytes; at most 10000 are accepted."]
    assert answers["names"][repr("a\x00b.json")] == "The file name 'a\\x00b.json' contains control characters."
    assert answers["names"][repr("{name}.bin")].startswith("{name}.bin: only safetensors")  # no second substitution
    # bidirectional controls (a right-to-left override makes a name read backwards) are control characters
    for name in ("model\u202enosj.safetensors", "a\u2066b.json", "a\u200fb.json", "a\u061cb.json"):
        assert answers["names"][repr(name)].endswith("contains control characters."), name
    assert answers["names"][repr("a\u200db.json")] is None  # a zero-width joiner is not a bidirectional control
    for name in ("", " ", "\ufeff", "\ufeff \u3000"):
        assert answers["names"][repr(name)] == "A file has an empty name."
    assert answers["names"][repr("x" * 195 + ".json")] is None
    assert "longer than 200" in answers["names"][repr("x" * 196 + ".json")]


def test_the_browsers_crc32_is_zlibs(page):
    """static/js/crc32.js (the submit page's Upload-Checksum) against zlib.crc32, the server's, over
    random bytes of every length around its 8-byte steps, and continued over pieces."""
    rng = random.Random(15)
    samples = [b"", b"123456789"] + [rng.randbytes(n) for n in (1, 7, 8, 9, 15, 16, 17, 4096, 65_543, 1 << 20)]
    answers = page.evaluate(
        """(samples) => samples.map((hex) => {
            const bytes = Uint8Array.from(hex.match(/../g) || [], (b) => parseInt(b, 16));
            return PodiumCrc32.uploadChecksum(bytes);
        })""",
        [s.hex() for s in samples],
    )
    assert answers == [chunk_checksum("crc32", [s]) for s in samples]
    assert answers[1] == "crc32 y/Q5Jg=="  # the CRC-32 check value 0xCBF43926 (see test_upload_chunks)
    for cut in range(1, 20):  # continued over pieces, each starting at every alignment of its words
        pieces = page.evaluate(
            """([hex, cut]) => {
                const bytes = Uint8Array.from(hex.match(/../g), (b) => parseInt(b, 16));
                return PodiumCrc32.crc32(bytes.subarray(cut), PodiumCrc32.crc32(bytes.subarray(0, cut), 0));
            }""",
            [samples[-3].hex(), cut],
        )
        assert pieces == zlib.crc32(samples[-3]), cut


def test_vendored_tus_client_is_the_published_file():
    data = (ROOT / "static/vendor/tus-js-client/tus.min.js").read_bytes()
    assert hashlib.sha256(data).hexdigest() == TUS_SHA256
    readme = (ROOT / "static/vendor/tus-js-client/README.md").read_text()
    assert TUS_SHA256 in readme and "4.3.1" in readme
    assert "MIT License" in (ROOT / "static/vendor/tus-js-client/LICENSE").read_text()
