"""``python -m evalcore rate``: output layout, methods, and hostile input (one line, exit code 2)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalcore.cli import main
from evalcore.ratings import aggregate, simulate_battles, write_battles_csv, write_pair_counts

COLUMNS = ["model", "rating", "ci_low", "ci_high", "rank", "rank_ub", "battles", "provisional"]


@pytest.fixture(scope="module")
def votes_csv(tmp_path_factory) -> Path:
    battles = simulate_battles(
        np.array([100.0, 50.0, 0.0, -150.0]),
        3_000,
        rng=np.random.default_rng(0),
        tie_rate=0.2,
        bothbad_share=0.3,
    )
    path = tmp_path_factory.mktemp("votes") / "votes.csv"
    write_battles_csv(battles, path)
    return path


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_rate_bt_csv_sorted_with_intervals(votes_csv, capsys):
    assert main(["rate", str(votes_csv), "--bootstrap", "200", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    rows = _rows(out)
    assert list(rows[0]) == COLUMNS
    assert [r["model"] for r in rows] == ["m0", "m1", "m2", "m3"]
    ratings = [float(r["rating"]) for r in rows]
    assert ratings == sorted(ratings, reverse=True)
    assert all(float(r["ci_low"]) <= float(r["rating"]) <= float(r["ci_high"]) for r in rows)
    assert sum(int(r["battles"]) for r in rows) == 2 * 3_000
    assert "mean of 1000" in err


def test_rate_anchor_json_and_out_file(votes_csv, tmp_path, capsys):
    out_path = tmp_path / "r.json"
    code = main(
        [
            "rate",
            str(votes_csv),
            "--anchor",
            "m3=800",
            "--bootstrap",
            "50",
            "--format",
            "json",
            "--out",
            str(out_path),
        ]
    )
    assert code == 0
    doc = json.loads(out_path.read_text())
    assert doc["anchor"] == ["m3", 800.0] and doc["interval"] == "bootstrap"
    m3 = next(r for r in doc["ratings"] if r["model"] == "m3")
    assert m3["rating"] == m3["ci_low"] == m3["ci_high"] == pytest.approx(800.0)
    assert "interval is zero by construction" in capsys.readouterr().err


def test_rate_pair_counts_file_sandwich_and_ties(votes_csv, tmp_path, capsys):
    from evalcore.ratings import read_battles

    counts_path = tmp_path / "counts.csv"
    write_pair_counts(aggregate(read_battles(votes_csv)), counts_path)
    assert main(["rate", str(counts_path), "--bootstrap", "0"]) == 0
    from_counts = _rows(capsys.readouterr().out)
    assert main(["rate", str(votes_csv), "--bootstrap", "0"]) == 0
    from_votes = _rows(capsys.readouterr().out)
    assert from_counts == from_votes
    assert main(["rate", str(votes_csv), "--bootstrap", "0", "--ties", "drop"]) == 0
    assert _rows(capsys.readouterr().out) != from_votes


def test_rate_elo_with_order_permutations(votes_csv, capsys):
    assert main(["rate", str(votes_csv), "--method", "elo", "--k", "16", "--bootstrap", "10"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert [r["model"] for r in rows][0] == "m0"
    assert float(rows[0]["ci_low"]) < float(rows[0]["ci_high"])
    assert main(["rate", str(votes_csv), "--method", "elo", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["interval"] == "none"  # no vote-order study unless asked


def test_rate_style_prints_coefficients(tmp_path, capsys):
    rng = np.random.default_rng(3)
    lines = [
        "model_a,model_b,winner,tokens_a,tokens_b,headers_a,headers_b,list_items_a,list_items_b,bold_a,bold_b"
    ]
    names = ["x", "y", "z"]
    for _ in range(600):
        a, b = rng.choice(3, size=2, replace=False)
        winner = rng.choice(["model_a", "model_b", "tie"])
        style = rng.integers(0, 50, size=8)
        lines.append(",".join([names[a], names[b], winner] + [str(v) for v in style]))
    path = tmp_path / "styled.csv"
    path.write_text("\n".join(lines) + "\n")
    assert main(["rate", str(path), "--method", "style", "--bootstrap", "20"]) == 0
    ratings_text, coef_text = capsys.readouterr().out.split("\n\n")
    assert len(_rows(ratings_text)) == 3
    coefs = _rows(coef_text)
    assert [c["coefficient"] for c in coefs] == ["tokens", "headers", "list_items", "bold"]
    assert list(coefs[0]) == ["coefficient", "estimate", "ci_low", "ci_high", "elo_per_sd"]


@pytest.mark.parametrize(
    "content, args, message",
    [
        (
            "model_a,model_b,winner\na,b,model_a\nb,a,maybe\n",
            [],
            "row 2, column 'winner': unknown winner 'maybe'",
        ),
        ("model_a,model_b,winner\na,b,model_a\na,a,tie\n", [], "row 2, columns 'model_a'/'model_b'"),
        ("", [], "no battles"),
        ("model_a,winner\na,tie\n", [], "column 'model_b': missing column"),
        (
            "model_a,model_b,winner\na,b,model_a\nb,a,model_b\n",
            [],
            "never lost to a model outside their group: a",
        ),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--anchor", "c=1"], "anchor model 'c'"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--anchor", "a"], "MODEL=RATING"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--bootstrap", "-1"], "--bootstrap"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--method", "style"], "needs style counts"),
        ("model_i,model_j,wins_i,wins_j\na,b,1,2\n", ["--method", "elo"], "needs individual battles"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--method", "elo", "--k", "nan"], "--k must be a positive number, not nan"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--method", "elo", "--k", "-4"], "--k must be a positive number"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--prior", "-1"], "--prior must be a non-negative number, not -1.0"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--prior", "inf"], "--prior must be a non-negative number"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--method", "style", "--prior", "nan"], "--prior must be"),
        ("model_a,model_b,winner\na,b,model_a\nb,a,model_a\n", ["--anchor", "a=nan"], "anchor a: the rating must be a finite number, not nan"),
    ],
)
def test_rate_hostile_input_is_one_line_exit_2(tmp_path, capsys, content, args, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["rate", str(path), *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert message in err


def test_rate_missing_file(capsys):
    assert main(["rate", "/nonexistent/votes.csv"]) == 2
    assert "No such file" in capsys.readouterr().err


def test_python_dash_m_entry_point(votes_csv):
    repo_root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, "-m", "evalcore", "rate", str(votes_csv), "--bootstrap", "0", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=repo_root,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["interval"] == "sandwich"
