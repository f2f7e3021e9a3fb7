"""Judge protocols: the bundled ones load, and malformed ones are refused with one line naming the problem."""

from __future__ import annotations

import pytest
import yaml

from evalcore.judging import bundled_protocols, load_protocol, parse_generated, parse_score

GOOD = {
    "name": "t",
    "kind": "pairwise",
    "user": "Q: {question}\nA: {answer_a}\nB: {answer_b}",
    "verdict": {"method": "logprob", "prefix": "My verdict: [[", "tokens": {"A": "A", "B": "B"}},
}


def write(tmp_path, data, name="p.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def with_(**changes):
    data = {**GOOD, **changes}
    return {k: v for k, v in data.items() if v is not None}


def test_bundled_protocols_load_and_cite_their_sources(judge):
    names = set(bundled_protocols())
    assert {"mt-bench-pairwise", "mt-bench-single", "arena-hard", "alpacaeval-logprob"} <= names
    for name in names:
        protocol = load_protocol(name, tokenizer=judge.tokenizer)
        assert "https://" in protocol.source, name
        if name.startswith("mt-bench"):  # Podium's wording of FastChat's structure, said plainly (not FastChat's text)
            assert protocol.source.startswith("Podium's own wording, after FastChat's"), name
        assert len(protocol.sha256) == 64
    arena = load_protocol("arena-hard")
    assert [(o.pattern, o.winner, o.weight) for o in arena.verdict.outcomes] == [
        ("[[A>>B]]", "A", 3.0), ("[[A>B]]", "A", 1.0), ("[[A=B]]", "tie", 1.0), ("[[B>A]]", "B", 1.0), ("[[B>>A]]", "B", 3.0)
    ]  # fmt: skip
    assert load_protocol("mt-bench-single").kind == "single"
    assert load_protocol("alpacaeval-logprob").verdict_token_ids(judge.tokenizer) == (
        judge.tokenizer.encode("A", add_special_tokens=False)[0],
        judge.tokenizer.encode("B", add_special_tokens=False)[0],
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (with_(colour="red"), "unknown key 'colour'"),
        (with_(user="Q: {question}\nA: {answer_a}"), "missing the placeholder {answer_b}"),
        (with_(user="{question} {answer_a} {answer_b} {answer}"), "placeholder {answer}, not allowed in a pairwise"),
        (with_(user="{question} {answer_a} {answer_b} {score}"), "placeholder {score}"),
        (with_(kind="triple"), "kind 'triple'"),
        (with_(verdict={"method": "logprob", "prefix": "[[", "tokens": {"A": "A"}}), "exactly the keys A and B"),
        (with_(verdict={"method": "logprob", "tokens": {"A": "A", "B": "B"}, "temp": 1}), "unknown key 'temp'"),
        (with_(verdict={"method": "vote"}), "method 'vote'"),
        (with_(verdict={"method": "generate", "max_new_tokens": 0, "outcomes": []}), "max_new_tokens"),
        (with_(verdict={"method": "generate", "max_new_tokens": 9, "outcomes": [{"pattern": "[[A]]", "winner": "A"}]}),
         "a pattern for A and one for B"),
        (with_(verdict={"method": "generate", "max_new_tokens": 9, "outcomes": [
            {"pattern": "[[A]]", "winner": "A"}, {"pattern": "[[B]]", "winner": "first"}]}), "winner 'first'"),
        (with_(kind="single", user="{question} {answer}"), "logprob needs kind pairwise"),
        (with_(user=None), "missing key 'user'"),
    ],
)
def test_malformed_protocols_are_refused_with_one_line(tmp_path, data, message):
    with pytest.raises(ValueError) as info:
        load_protocol(write(tmp_path, data))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_verdict_strings_with_the_same_first_token_are_refused(tmp_path, judge):
    path = write(tmp_path, with_(verdict={"method": "logprob", "prefix": "[[", "tokens": {"A": "A1", "B": "A2"}}))
    load_protocol(path)  # without a tokenizer the strings differ, which is all that can be checked
    with pytest.raises(ValueError, match="share the first token id 49"):
        load_protocol(path, tokenizer=judge.tokenizer)


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="not valid YAML"):
        load_protocol(write(tmp_path, "name: [unclosed"))
    with pytest.raises(ValueError, match="neither a file nor a bundled protocol"):
        load_protocol(tmp_path / "absent.yaml")


def test_sha256_covers_the_prompt_and_verdict_only(tmp_path):
    base = load_protocol(write(tmp_path, GOOD, "a.yaml"))
    renamed = load_protocol(write(tmp_path, with_(name="other", source="https://x"), "b.yaml"))
    changed = load_protocol(write(tmp_path, with_(user=GOOD["user"] + "\n"), "c.yaml"))
    assert base.sha256 == renamed.sha256 != changed.sha256


def test_placeholders_are_filled_in_one_pass(tmp_path):
    protocol = load_protocol(write(tmp_path, with_(system="Judge fairly.")))
    messages = protocol.messages(question="2+2?", answer_a="it is {answer_b}", answer_b="4")
    assert messages == [
        {"role": "system", "content": "Judge fairly."},
        {"role": "user", "content": "Q: 2+2?\nA: it is {answer_b}\nB: 4"},
    ]
    guided = load_protocol(write(tmp_path, with_(user=GOOD["user"] + "\nRef: {reference}"), "r.yaml"))
    with pytest.raises(ValueError, match="every item needs a reference"):
        guided.messages(question="q", answer_a="a", answer_b="b")


def test_generated_verdicts_and_scores_are_parsed():
    arena = load_protocol("arena-hard")
    assert parse_generated(arena, "Mine... My final verdict is: [[B>>A]]") == ("[[B>>A]]", "B", 3.0)
    assert parse_generated(arena, "[[A=B]] ... so [[A=B]]") == ("[[A=B]]", "tie", 1.0)
    with pytest.raises(ValueError, match="contains no verdict"):
        parse_generated(arena, "Both are fine.")
    with pytest.raises(ValueError, match="ambiguous"):
        parse_generated(arena, "[[A>B]] or maybe [[B>A]]")
    single = load_protocol("mt-bench-single")
    assert parse_score(single, "Good answer. Rating: [[7]]") == 7.0
    with pytest.raises(ValueError, match="outside"):
        parse_score(single, "Rating: [[11]]")
