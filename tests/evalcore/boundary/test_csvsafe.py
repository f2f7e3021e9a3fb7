"""CSV injection: formula-like text is escaped as OWASP recommends; numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pytest

from evalcore.boundary import csvsafe
from evalcore.cli import main


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://evil.example","x")', '\'=HYPERLINK("http://evil.example","x")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("@SUM(1,2)", "'@SUM(1,2)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        (" =1+1", "' =1+1"),  # leading white space that an importer may trim
        ("\n=1+1", "'\n=1+1"),
        ("\u00a0=1+1", "'\u00a0=1+1"),
        ("\ufeff=1+1", "'\ufeff=1+1"),
        ("\uff1d1+1", "'\uff1d1+1"),  # full-width equals sign
        ("  \uff20SUM(1)", "'  \uff20SUM(1)"),
        (" -1", " -1"),  # a number with a space stays a number
        ("a =b", "a =b"),
        ("smollm2-135m", "smollm2-135m"),
        ("a=b", "a=b"),
        ("", ""),
        ("-0.25", "-0.25"),
        ("+3", "+3"),
        ("-inf", "-inf"),
        ("1e-05", "1e-05"),
    ],
)
def test_text_cells(cell, written):
    assert csvsafe.safe_cell(cell) == written


@pytest.mark.parametrize("number", [-1, -0.5, 3, float("-inf"), True, None])
def test_numbers_and_empty_cells_are_untouched(number):
    assert csvsafe.safe_cell(number) is number


def test_writer_round_trip_keeps_numbers_and_escapes_text():
    buffer = io.StringIO()
    w = csvsafe.writer(buffer, lineterminator="\n")
    w.writerow(["model", "score"])
    w.writerows([["=1+1", -0.125], ["plain", "-0.5"]])
    rows = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert rows == [["model", "score"], ["'=1+1", "-0.125"], ["plain", "-0.5"]]


def test_rate_command_escapes_a_hostile_model_name(tmp_path, capsys):
    votes = tmp_path / "votes.csv"
    rows = ["model_a,model_b,winner"]
    rows += ['"=HYPERLINK(""http://x"")",good,model_a'] * 5 + ['good,"=HYPERLINK(""http://x"")",model_a'] * 7
    votes.write_text("\n".join(rows) + "\n")
    assert main(["rate", str(votes), "--bootstrap", "0"]) == 0
    models = [row[0] for row in csv.reader(io.StringIO(capsys.readouterr().out))][1:]
    assert sorted(models) == ["'=HYPERLINK(\"http://x\")", "good"]
