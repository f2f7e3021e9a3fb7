"""Training corpora (.txt, .jsonl, gzipped or not): corrupt input is counted, never fatal, whatever
the bytes, and every chunk read is UTF-8 text."""

from __future__ import annotations

import gzip
import json

from hypothesis import example, given
from hypothesis import strategies as st

from evalcore.contamination.corpus import CorpusStats, read_chunks
from tests.fuzz.strategies import json_values

LINES = st.lists(st.one_of(
    st.text(max_size=30),
    json_values(st.sampled_from(["text", "id", "meta"])).map(json.dumps),
    st.fixed_dictionaries({"text": st.text(max_size=30) | json_values()}).map(json.dumps),
    st.sampled_from(["[" * 5000, '{"text": ' * 3000, "\x00", "a\x00b", '{"text": "\\ud800"}']),
), max_size=6).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass"))  # fmt: skip
CONTENT = LINES | st.binary(max_size=200)
SUFFIX = st.sampled_from([".txt", ".jsonl", ".txt.gz", ".jsonl.gz"])
PACKING = st.sampled_from(["plain", "gzip", "truncated gzip"])


@given(CONTENT, SUFFIX, PACKING, st.integers(1, 64), st.integers(1, 64))
@example(b'{"text": ' * 3000 + b"1", ".jsonl", "plain", 1 << 20, 1 << 22)  # deep JSON: counted, not a crash
def test_corpus_file(tmp_path_factory, content, suffix, packing, block_bytes, max_line_bytes):
    if suffix.endswith(".gz") and packing != "plain":
        content = gzip.compress(content)
        content = content[: len(content) // 2] if packing == "truncated gzip" else content
    path = tmp_path_factory.mktemp("corpus") / f"corpus{suffix}"
    path.write_bytes(content)
    stats = CorpusStats()
    for chunk, continues in read_chunks(path, stats=stats, block_bytes=block_bytes, max_line_bytes=max_line_bytes):
        chunk.decode("utf-8")
        assert isinstance(continues, bool)
    assert stats.files == 1
    assert stats.as_dict()["lines_skipped"] >= 0
