"""The redactor against its planted set (recall per kind and precision, with intervals), hostile text,
and a recogniser that fails."""

from __future__ import annotations

import pytest

from evalcore.privacy import redact as redact_module
from evalcore.privacy.planted import GROUPS, group_of, planted_items
from evalcore.privacy.planted import measure as planted_measure
from evalcore.privacy.redact import FAILED, redact, redact_spans


@pytest.fixture(scope="module")
def measured():
    return planted_measure(redact_spans)


def test_the_planted_set_is_big_and_covers_every_kind():
    items = planted_items()
    kinds = {kind for item in items for kind, _ in item.planted}
    planted = sum(len(item.planted) for item in items)
    lookalikes = sum(not item.planted for item in items)
    assert planted >= 600 and len(kinds) >= 40 and lookalikes >= 150  # issue 48's floor
    assert {group_of(kind) for kind in kinds} == {"structured", "secrets", "identity"}
    assert set(GROUPS["identity"]) <= kinds
    assert planted_items() == items  # deterministic


def test_recall_and_precision_on_the_planted_set(measured):
    groups = measured["recall_group"]
    assert groups["structured"]["value"] >= 0.99, measured["missed"]
    assert groups["secrets"]["value"] == 1.0, measured["missed"]  # no planted secret is ever published
    assert groups["identity"]["value"] >= 0.85, measured["missed"]
    assert measured["lookalikes_left_alone"]["value"] >= 0.97, measured["false_alarms"]
    assert measured["precision"]["value"] >= 0.95
    for kind, row in measured["recall"].items():
        assert 0 <= row["ci_low"] <= row["value"] <= row["ci_high"] <= 1, kind


def test_placeholders_keep_the_type_and_the_rest_of_the_text():
    result = redact("write to ana@example.com, call +44 20 7946 0958, key AKIAIOSFODNN7EXAMPLE. Thanks!")
    assert result.text == "write to <EMAIL>, call <PHONE>, key <SECRET>. Thanks!"
    assert result.found == {"EMAIL": 1, "PHONE": 1, "SECRET": 1}
    assert redact("Python 3.11.7, 2024-05-01, see https://docs.python.org/3/").found == {}


@pytest.mark.parametrize(
    "text",
    [
        "x" * 300_000 + " ana@example.com",
        "\x00\x01\x02\ufffd" * 5000 + "ana@example.com",
        "<div>" * 20_000 + "ana@example.com" + "</div>" * 20_000,
        "\udc80 lone surrogate ana@example.com",
        "[" * 10_000 + "]" * 10_000,
        "",
        "   \n\t ",
    ],
)
def test_hostile_text_is_redacted_without_error(text):
    result = redact(text)
    assert isinstance(result.text, str) and "ana@example.com" not in result.text


def test_a_failing_recogniser_lets_nothing_out(monkeypatch):
    def broken(text):
        raise RuntimeError("boom")

    monkeypatch.setattr(redact_module, "_presidio_spans", broken)
    assert redact("ana@example.com") .text == FAILED
    with pytest.raises(TypeError):
        redact(b"bytes")
