"""The n-gram scan: planted copies in a corpus of real GSM8K text, the textbook scan as reference."""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest

from evalcore.contamination import benchmark_items, normalise, scan_items, words, write_scan
from evalcore.contamination.ngrams import build_index
from evalcore.contamination.scan import _confirmed
from evalcore.contamination.textbook import textbook_scan
from evalcore.contamination.tokens import ChunkWords, WordHasher, python_word_hash
from evalcore.engine import TaskIndex
from evalcore.engine.runner import build_records

EXACT = [3, 17, 101, 250, 404, 512, 777, 900, 1111, 1300]
# Items of 45 words or more: two substituted words leave 13-word runs intact. (In a short item the
# same edit leaves none: the scan misses it, one reason it is a floor.)
REWORDED = [37, 74, 111, 148, 333, 407, 518, 592, 703, 740]
# Human paraphrases of GSM8K test items 0 and 1: same problem, no 13 words in a row in common.
PARAPHRASES = {
    0: "Every day Janet's ducks produce sixteen eggs; three of them she has for breakfast and four go "
    "into muffins she bakes for friends. The rest are sold at the market for two dollars apiece. "
    "What are her daily earnings?",
    1: "To make a robe you need two bolts of blue fibre plus half as much white fibre. What is the "
    "total number of bolts required?",
}


def reword(text: str, rng: random.Random) -> str:
    """A light edit: two words replaced (a name or a number changed, as in perturbed benchmark copies)."""
    tokens = text.split(" ")
    for position in (len(tokens) // 3, 2 * len(tokens) // 3):
        tokens[position + rng.randrange(-2, 3)] = "something"
    return " ".join(tokens)


def filler(shared_data, count: int) -> list[str]:
    with open(shared_data / "benchmarks" / "gsm8k" / "train.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(count), handle)]
    return [f"{r['question']}\n{r['answer']}" for r in rows]


@pytest.fixture
def planted_corpus(tmp_path, shared_data, gsm8k_items):
    """GSM8K train text with planted test items, across .txt, .jsonl, .txt.gz and .jsonl.gz files."""
    rng = random.Random(0)
    docs = filler(shared_data, 600)
    planted = [gsm8k_items[i].text for i in EXACT] + [reword(gsm8k_items[i].text, rng) for i in REWORDED]
    planted += list(PARAPHRASES.values())
    for text in planted:
        docs.insert(rng.randrange(len(docs)), text)
    folder = tmp_path / "corpus"
    folder.mkdir()
    quarter = len(docs) // 4
    (folder / "a.txt").write_text("\n\n".join(docs[:quarter]), encoding="utf-8")
    (folder / "b.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[quarter : 2 * quarter]))
    with gzip.open(folder / "c.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n\n".join(docs[2 * quarter : 3 * quarter]))
    with gzip.open(folder / "d.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs[3 * quarter :])))
    (folder / "notes.md").write_text("not a corpus file")
    return folder


def test_normalisation_lowercases_and_deletes_punctuation():
    assert words("Janet’s ducks lay 16 eggs... She sells them at $2, daily!") == [
        "janets", "ducks", "lay", "16", "eggs", "she", "sells", "them", "at", "2", "daily",
    ]  # fmt: skip
    assert normalise("Don't  STOP_now") == "dont  stopnow"
    assert words("a\x00b") == ["a", "b"]  # NUL is the reader's boundary word, never a benchmark word


@pytest.mark.parametrize(
    "text",
    [
        "Hello, World!  don't $1,200 a_b x\x1fy",
        "Janet’s ducks — naïve ÉCOLE Straße İstanbul KELVIN \u212a \u00a0split\u2009thin “quoted” …",
        "", "   \n\t ", "—", "x—y", "\u3000全角\u3000スペース",
    ],
)  # fmt: skip
def test_byte_level_words_equal_the_str_normaliser(text):
    hasher = WordHasher(0x9E3779B97F4A7C15)
    chunk = hasher.chunk(text.encode("utf-8"))
    expected = normalise(text).split()
    assert [chunk.word(k) for k in range(chunk.hashes.size)] == expected
    assert chunk.hashes.tolist() == [python_word_hash(w, hasher.multiplier) for w in expected]


def test_items_are_the_engines_prompts_with_the_engines_doc_ids(data_env, gsm8k_items):
    (config,), _ = TaskIndex().resolve(["gsm8k"])
    records = build_records(config, num_fewshot=0, limit=20, seed=0, fewshot_seed=1234)
    assert [(i.doc_id, i.text) for i in gsm8k_items[:20]] == [(r["doc_id"], r["prompt"]) for r in records]
    assert len(gsm8k_items) == 1319


def test_mmlu_items_carry_their_options(data_env):
    cloze = benchmark_items(["mmlu_cloze_abstract_algebra"])
    assert all(choice in cloze[0].text for choice in ("0", "4", "2", "6"))
    assert cloze[0].text.startswith("Question: Find the degree")


def test_planted_copies_exact_found_reworded_mostly_paraphrases_not(planted_corpus, gsm8k_items, tmp_path):
    result = scan_items(gsm8k_items, planted_corpus, n=13)
    flagged = {m.doc_id: m for m in result.flagged}
    assert set(EXACT) <= set(flagged)
    assert all(flagged[i].share > 0.9 for i in EXACT)  # "Answer:" n-grams at the end may be missing
    reworded_found = [i for i in REWORDED if i in flagged]
    assert len(reworded_found) >= 8, reworded_found
    assert all(flagged[i].share < 1.0 for i in reworded_found)
    assert not set(PARAPHRASES) & set(flagged)
    assert result.tasks["gsm8k"].items == 1319
    assert result.corpus["files"] == 4 and result.corpus["ignored_files"] == 1
    assert result.corpus["lines_skipped"] == 0

    out = write_scan(result, tmp_path / "out")
    lines = [json.loads(line) for line in (out / "contaminated.jsonl").read_text().splitlines()]
    assert {line["doc_id"] for line in lines} == set(flagged)
    assert set(lines[0]) == {"task", "doc_id", "matched_ngrams", "ngrams", "share"}
    report = json.loads((out / "report.json").read_text())
    assert report["tasks"]["gsm8k"]["flagged"] == len(flagged)
    assert report["tasks"]["gsm8k"]["share"] == pytest.approx(len(flagged) / 1319, abs=1e-6)


@pytest.mark.parametrize(("n", "block_bytes"), [(13, 1 << 20), (8, 4096), (13, 97)])
def test_vectorised_scan_equals_the_textbook_scan(planted_corpus, gsm8k_items, n, block_bytes):
    """Same flagged items and counts, whatever the n-gram length and however the files are cut into blocks."""
    reference = textbook_scan(gsm8k_items, planted_corpus, n=n)
    result = scan_items(gsm8k_items, planted_corpus, n=n, block_bytes=block_bytes)
    assert {(m.doc_id, m.matched_ngrams) for m in result.flagged} == {
        (gsm8k_items[i].doc_id, count) for i, count in reference.items()
    }
    assert len(reference) >= 19


def test_ngrams_do_not_span_jsonl_documents_but_do_span_txt_lines(tmp_path, gsm8k_items):
    text_words = gsm8k_items[10].text.split()
    half = len(text_words) // 2
    first, second = " ".join(text_words[:half]), " ".join(text_words[half:])
    (tmp_path / "split.jsonl").write_text(json.dumps({"text": first}) + "\n" + json.dumps({"text": second}) + "\n")
    (tmp_path / "lines.txt").write_text(first + "\n" + second + "\n")
    split = scan_items(gsm8k_items, tmp_path / "split.jsonl").flagged
    lines = scan_items(gsm8k_items, tmp_path / "lines.txt").flagged
    item = [m for m in lines if m.doc_id == 10][0]
    assert item.share == pytest.approx(1.0, abs=0.1)
    split_item = [m for m in split if m.doc_id == 10][0]
    assert split_item.matched_ngrams == item.matched_ngrams - 12  # the 12 windows across the cut are lost


def test_bad_input_is_counted_and_skipped_never_fatal(tmp_path, gsm8k_items):
    copy = gsm8k_items[7].text
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "mixed.txt").write_bytes(
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR binary\n" + b"\xff\xfe\xfa not utf-8\n" + b"y" * 5000 + b"\n"
        + copy.encode() + b"\n" + b"z" * 3000
    )  # fmt: skip
    (folder / "records.jsonl").write_text('{"text": 3}\n[1, 2]\nnot json\n{"other": "x"}\n\n' + json.dumps({"text": copy}) + "\n")
    (folder / "truncated.txt.gz").write_bytes(gzip.compress(copy.encode() * 50)[:60])
    (folder / "fake.jsonl.gz").write_bytes(b"this is not gzip at all")
    result = scan_items(gsm8k_items, folder, max_line_bytes=1000, block_bytes=256)
    assert [m.doc_id for m in result.flagged] == [7]
    skipped = result.corpus["skipped"]
    # the PNG signature line and the Latin-1 line are not UTF-8; the NUL line is binary
    assert skipped == {"binary": 1, "decode_error": 2, "line_too_long": 2, "bad_json": 1, "no_text": 3}
    assert result.corpus["lines_skipped"] == 9
    failed = {f["path"].rsplit("/", 1)[1]: f["reason"] for f in result.corpus["failed_files"]}
    assert set(failed) == {"truncated.txt.gz", "fake.jsonl.gz"}
    assert "BadGzipFile" in failed["fake.jsonl.gz"] and "EOFError" in failed["truncated.txt.gz"]


def test_a_hash_collision_cannot_flag_an_item(gsm8k_items):
    """A window whose word hashes match but whose words differ is rejected by the word-by-word check."""
    index = build_index(gsm8k_items[:5], n=13, rng=np.random.default_rng(0))
    hasher = WordHasher(index.word_multiplier)
    real = hasher.chunk(gsm8k_items[0].text.encode())
    rows, starts = index.match(real.hashes)
    assert rows.size and _confirmed(index, int(rows[0]), int(starts[0]), [], real)
    impostor = ChunkWords(real.hashes, real.data.upper(), real.starts, real.ends, real.special)
    assert not _confirmed(index, int(rows[0]), int(starts[0]), [], impostor)


@pytest.mark.parametrize("n", [7, 14, 13.0, True])
def test_n_outside_8_to_13_is_refused(gsm8k_items, tmp_path, n):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="n must be an integer from 8 to 13"):
        scan_items(gsm8k_items[:3], tmp_path / "a.txt", n=n)


def test_index_memory_is_the_benchmarks_not_the_corpus(gsm8k_items):
    index = build_index(gsm8k_items, n=13, rng=np.random.default_rng(1))
    assert index.hashes.size == index.grams.shape[0] > 40_000
    assert index.nbytes < 16 * 1024 * 1024
    assert np.all(np.diff(index.hashes.astype(np.float64)) >= 0)
