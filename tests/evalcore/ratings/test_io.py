"""Vote readers: formats, aggregation, and hostile input (every error names the row and the column)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from evalcore.ratings import (
    aggregate,
    battles_from_records,
    read_battles,
    read_pair_counts,
    write_battles_csv,
    write_pair_counts,
)

RECORDS = [
    {"model_a": "alpha", "model_b": "beta", "winner": "model_a", "tstamp": 3.0},
    {"model_a": "beta", "model_b": "alpha", "winner": "model_a", "tstamp": 1.0},
    {"model_a": "gamma", "model_b": "alpha", "winner": "tie", "tstamp": 2.0},
    {"model_a": "alpha", "model_b": "gamma", "winner": "tie (bothbad)", "tstamp": 4.0},
    {"model_a": "beta", "model_b": "gamma", "winner": "model_b", "tstamp": 5.0},
]


def _csv(rows, header=("model_a", "model_b", "winner", "tstamp")):
    lines = [",".join(header)] + [",".join(str(r[h]) for h in header) for r in rows]
    return "\n".join(lines) + "\n"


def test_csv_json_jsonl_read_the_same(tmp_path):
    (tmp_path / "v.csv").write_text(_csv(RECORDS))
    (tmp_path / "v.json").write_text(json.dumps(RECORDS))
    (tmp_path / "v.jsonl").write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    got = [read_battles(tmp_path / f"v.{ext}") for ext in ("csv", "json", "jsonl")]
    for b in got:
        assert b.models == ("alpha", "beta", "gamma")
        np.testing.assert_array_equal(b.model_a, [0, 1, 2, 0, 1])
        np.testing.assert_array_equal(b.model_b, [1, 0, 0, 2, 2])
        np.testing.assert_array_equal(b.outcome, [0, 0, 2, 3, 1])
        np.testing.assert_array_equal(b.tstamp, [3, 1, 2, 4, 5])


def test_evalica_layout_and_stream_input():
    text = "left,right,winner\nx,y,left\ny,x,right\nx,y,tie\n"
    b = read_battles(io.StringIO(text), format="csv")
    assert b.models == ("x", "y")
    np.testing.assert_array_equal(b.outcome, [0, 1, 2])
    assert b.tstamp is None


def test_csv_quotes_crlf_and_block_boundaries(tmp_path, monkeypatch):
    import evalcore.ratings.io as vote_io

    quoted = 'model_a,model_b,winner\r\n"Acme, Inc. 7B",b,model_a\r\nb,"Acme, Inc. 7B",tie\r\n'
    (tmp_path / "q.csv").write_bytes(quoted.encode())
    b = read_battles(tmp_path / "q.csv")
    assert b.models == ("Acme, Inc. 7B", "b")
    np.testing.assert_array_equal(b.outcome, [0, 2])
    crlf = "model_a,model_b,winner\r\na,b,model_a\r\nb,a,model_b\r\n"
    (tmp_path / "crlf.csv").write_bytes(crlf.encode())
    np.testing.assert_array_equal(read_battles(tmp_path / "crlf.csv").outcome, [0, 1])
    # Tiny blocks: rows straddle block boundaries and errors still name the right row.
    monkeypatch.setattr(vote_io, "_BLOCK_CHARS", 7)
    lines = ["model_a,model_b,winner"] + [f"m{k % 3},m{(k + 1) % 3},model_a" for k in range(50)]
    (tmp_path / "many.csv").write_text("\n".join(lines))  # no final newline
    many = read_battles(tmp_path / "many.csv")
    assert len(many) == 50 and many.models == ("m0", "m1", "m2")
    lines[38] = "m0,m1,nobody"
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"row 38, column 'winner': unknown winner 'nobody'"):
        read_battles(tmp_path / "bad.csv")
    lines[38] = "m0,m1,tie,extra"
    (tmp_path / "wide.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"row 38: has 4 fields"):
        read_battles(tmp_path / "wide.csv")


def test_aggregate_orients_pairs_and_counts_outcomes():
    counts = aggregate(battles_from_records(RECORDS))
    table = {
        (counts.models[i], counts.models[j]): (wi, wj, t, bb)
        for i, j, wi, wj, t, bb in zip(
            counts.i, counts.j, counts.wins_i, counts.wins_j, counts.ties, counts.bothbad
        )
    }
    # alpha beat beta once (row 1); beta beat alpha once (row 2, beta was model_a).
    assert table == {
        ("alpha", "beta"): (1, 1, 0, 0),
        ("alpha", "gamma"): (0, 0, 1, 1),
        ("beta", "gamma"): (0, 1, 0, 0),
    }
    np.testing.assert_array_equal(counts.battles_per_model(), [4, 3, 3])


def test_pair_counts_round_trip(tmp_path):
    counts = aggregate(battles_from_records(RECORDS))
    write_pair_counts(counts, tmp_path / "c.csv")
    back = read_pair_counts(tmp_path / "c.csv")
    assert back.models == counts.models
    np.testing.assert_array_equal(back.cells(), counts.cells())


def test_battles_csv_round_trip(tmp_path):
    b = battles_from_records(RECORDS)
    write_battles_csv(b, tmp_path / "b.csv")
    back = read_battles(tmp_path / "b.csv")
    np.testing.assert_array_equal(back.outcome, b.outcome)
    np.testing.assert_array_equal(back.model_a, b.model_a)


def test_style_columns_flat_and_fastchat_metadata():
    flat = dict(RECORDS[0], tokens_a=10, tokens_b=20, headers_a=1, headers_b=0, list_items_a=3,
                list_items_b=0, bold_a=2, bold_b=1)  # fmt: skip
    meta = {
        "model_a": "a", "model_b": "b", "winner": "model_b",
        "conv_metadata": {
            "sum_assistant_a_tokens": 10, "sum_assistant_b_tokens": 20,
            "header_count_a": {"h1": 1, "h2": 0}, "header_count_b": {"h1": 0},
            "list_count_a": {"ordered": 2, "unordered": 1}, "list_count_b": {"ordered": 0},
            "bold_count_a": {"**": 2, "__": 0}, "bold_count_b": {"**": 1},
        },
    }  # fmt: skip
    for rec in (flat, meta):
        b = battles_from_records([rec])
        np.testing.assert_array_equal(b.style_a, [[10, 1, 3, 2]])
        np.testing.assert_array_equal(b.style_b, [[20, 0, 0, 1]])


@pytest.mark.parametrize(
    "text, message",
    [
        ("model_a,model_b,winner\na,b,model_a\na,b,draw\n", r"row 2, column 'winner': unknown winner 'draw'"),
        (
            "model_a,model_b,winner\na,b,model_a\nc,c,tie\n",
            r"row 2, columns 'model_a'/'model_b': model 'c' plays",
        ),
        ("", r"no battles"),
        ("model_a,model_b,winner\n", r"header but no rows"),
        ("model_a,winner\na,model_a\n", r"column 'model_b': missing column"),
        ("model_a,model_b,winner\na,,model_a\n", r"row 1, column 'model_b': missing model name"),
        ("model_a,model_b,winner\na,b\n", r"row 1: has 2 fields"),
        ("model_a,model_b,winner,tstamp\na,b,tie,x1\n", r"row 1, column 'tstamp': not a finite number"),
        ("model_a,model_b,winner,tstamp\na,b,tie,1\na,b,tie,nan\n", r"row 2, column 'tstamp': not a finite"),
    ],
)
def test_hostile_csv(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_battles(path)


@pytest.mark.parametrize(
    "records, message",
    [
        ([{"model_a": "a", "model_b": "b", "winner": "a"}], r"row 1, column 'winner': unknown winner 'a'"),
        ([{"model_a": "a", "model_b": "a", "winner": "tie"}], r"row 1, columns 'model_a'/'model_b'"),
        ([{"model_a": "a", "winner": "tie"}], r"row 1, column 'model_b': missing value"),
        ([], r"no battles"),
        ([{"model_a": "a", "model_b": "b", "winner": "tie"}, 3], r"row 2: expected an object"),
    ],
)
def test_hostile_records(records, message):
    with pytest.raises(ValueError, match=message):
        battles_from_records(records)


def test_hostile_json_files(tmp_path):
    (tmp_path / "e.json").write_text("[]")
    with pytest.raises(ValueError, match="no battles"):
        read_battles(tmp_path / "e.json")
    (tmp_path / "o.json").write_text('{"model_a": 1}')
    with pytest.raises(ValueError, match="expected a JSON list"):
        read_battles(tmp_path / "o.json")
    (tmp_path / "bad.jsonl").write_text('{"model_a": "a", "model_b": "b", "winner": "tie"}\n{oops\n')
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        read_battles(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="no battles"):
        read_battles(tmp_path / "empty.jsonl")


def test_hostile_pair_counts(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("model_i,model_j,wins_i,wins_j\na,b,3,-1\n")
    with pytest.raises(ValueError, match=r"row 1, column 'wins_j'"):
        read_pair_counts(path)
    path.write_text("model_i,model_j,wins_i,wins_j\na,a,3,1\n")
    with pytest.raises(ValueError, match="plays itself"):
        read_pair_counts(path)
    path.write_text("model_i,wins_i,wins_j\na,3,1\n")
    with pytest.raises(ValueError, match=r"column 'model_j': missing column"):
        read_pair_counts(path)


def test_records_stream_in_chunks(monkeypatch, tmp_path):
    from evalcore.ratings import battles as battles_module

    monkeypatch.setattr(battles_module._RecordColumns, "chunk", 2)
    records = RECORDS * 3
    b = battles_from_records(iter(records))
    assert len(b) == 15 and b.models == ("alpha", "beta", "gamma")
    np.testing.assert_array_equal(b.tstamp[:5], [3, 1, 2, 4, 5])
    # A record without tstamp after the first chunks: timestamps are dropped for all.
    partial = records[:4] + [{k: v for k, v in RECORDS[0].items() if k != "tstamp"}]
    assert battles_from_records(partial).tstamp is None
    bad = records[:7] + [{"model_a": "x", "model_b": "x", "winner": "tie"}]
    with pytest.raises(ValueError, match="row 8, columns 'model_a'/'model_b': model 'x' plays itself"):
        battles_from_records(bad)
    bad = records[:5] + [{"model_a": "x", "model_b": "y", "winner": "nobody"}]
    with pytest.raises(ValueError, match="row 6, column 'winner'"):
        battles_from_records(bad)
    (tmp_path / "v.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    np.testing.assert_array_equal(read_battles(tmp_path / "v.jsonl").outcome, b.outcome)
