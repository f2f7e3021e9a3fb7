"""Category protocols: the five bundled ones load, their hashes follow what changes a tag, and hostile
protocol files are refused with a message naming the problem (never a crash, never a half protocol)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from evalcore.categories import (
    bundled_category_protocols,
    category_protocol_from_dict,
    load_category_protocol,
)
from tests.evalcore.categories.conftest import MIXED

BUNDLED = {"hard-prompt": "hard_prompt", "coding": "coding", "math": "math",
           "creative-writing": "creative_writing", "instruction-following": "instruction_following"}  # fmt: skip
CATEGORY_RULE = r"^[a-z_]+(:[A-Za-z0-9_-]{1,16})?$"  # common/query.py's CATEGORY_PATTERN


def test_the_five_bundled_protocols_load_and_name_site_categories():
    assert set(bundled_category_protocols()) == set(BUNDLED)
    for name, category in BUNDLED.items():
        protocol = load_category_protocol(name)
        assert protocol.category == category and re.fullmatch(CATEGORY_RULE, category)
        assert protocol.method == "logprob" and protocol.version == "1"
        assert "{prompt}" in protocol.user
    hard = load_category_protocol("hard-prompt")
    assert len(hard.criteria) == 7 and hard.threshold == 6
    assert [c.name for c in hard.criteria] == ["specificity", "domain_knowledge", "complexity", "problem_solving",
                                               "creativity", "technical_accuracy", "real_world"]  # fmt: skip


def test_the_hash_covers_what_changes_a_tag_and_nothing_else():
    base = category_protocol_from_dict(MIXED)
    renamed = category_protocol_from_dict({**MIXED, "name": "other", "version": 7, "description": "x"})
    assert renamed.sha256 == base.sha256
    stricter = copy.deepcopy(MIXED)
    stricter["verdict"]["criteria"].append({"name": "more", "prefix": "More?"})
    stricter["verdict"]["threshold"] = 2
    assert category_protocol_from_dict(stricter).sha256 != base.sha256
    assert category_protocol_from_dict({**MIXED, "user": "Prompt: {prompt}"}).sha256 != base.sha256


def test_messages_fill_the_prompt_once_leaving_braces_in_it_alone():
    protocol = category_protocol_from_dict(MIXED)
    assert protocol.messages("say {prompt} and {x}") == [
        {"role": "system", "content": "Answer yes or no."},
        {"role": "user", "content": "say {prompt} and {x}"},
    ]


def _with(path: str, value):
    data = copy.deepcopy(MIXED)
    target = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if value is KeyError:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data


HOSTILE = [
    ("a list", ["name", "x"], "must be a mapping"),
    ("unknown key", {**MIXED, "shell": "rm -rf /"}, "unknown key 'shell'"),
    ("no category", _with("category", KeyError), "missing key 'category'"),
    ("category with a capital", _with("category", "Coding"), "must be 1 to 48 of a-z"),
    ("category with a value", _with("category", "coding:x"), "must be 1 to 48 of a-z"),
    ("reserved category", _with("category", "overall"), "one the site makes itself"),
    ("number as name", _with("name", 5), "'name' must be a string"),
    ("another placeholder", _with("user", "{prompt} {answer}"), "placeholder {answer}"),
    ("placeholder in system", _with("system", "{question}"), "placeholder {question}"),
    ("no prompt placeholder", _with("user", "classify it"), "missing the placeholder {prompt}"),
    ("method", _with("verdict.method", "vibes"), "is not logprob or generate"),
    ("no criteria", _with("verdict.criteria", []), "non-empty list"),
    ("criteria as text", _with("verdict.criteria", "code"), "non-empty list"),
    ("criterion as text", _with("verdict.criteria.0", "code"), "must be a mapping"),
    ("bad criterion name", _with("verdict.criteria.0.name", "Code Review"), "lowercase letters"),
    ("criterion twice", _with("verdict.criteria", [{"name": "a"}, {"name": "a"}]), "listed twice"),
    ("too many criteria", _with("verdict.criteria", [{"name": f"c{i}"} for i in range(33)]), "at most 32"),
    ("threshold above criteria", _with("verdict.threshold", 2), "from 1 to 1"),
    ("threshold zero", _with("verdict.threshold", 0), "from 1 to 1"),
    ("threshold true", _with("verdict.threshold", True), "from 1 to 1"),
    ("threshold text", _with("verdict.threshold", "6"), "from 1 to 1"),
    ("same answers", _with("verdict.answers", {"yes": " y", "no": " y"}), "two different"),
    ("answers missing no", _with("verdict.answers", {"yes": " y"}), "exactly the keys yes and no"),
    ("empty answer", _with("verdict.answers", {"yes": "", "no": " n"}), "two different non-empty"),
    ("max tokens on logprob", _with("verdict.max_new_tokens", 5), "unknown key 'max_new_tokens'"),
    ("generate without max tokens", {**MIXED, "verdict": {"method": "generate", "criteria": [{"name": "a"}]}},
     "max_new_tokens must be"),
    ("generate with a huge max", {**MIXED, "verdict": {"method": "generate", "max_new_tokens": 10**9,
                                                       "criteria": [{"name": "a"}]}}, "from 1 to 4096"),
    ("NUL in the template", _with("user", "{prompt}\x00"), "NUL"),
    ("a huge template", _with("user", "{prompt}" + "x" * 20_000), "longer than"),
    ("version as a list", _with("version", [1]), "version must be"),
]  # fmt: skip


@pytest.mark.parametrize(("label", "data", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_protocols_are_refused_with_a_message(tmp_path, label, data, message):
    with pytest.raises(ValueError) as refused:
        category_protocol_from_dict(data, where="p.yaml")
    assert message in str(refused.value) and str(refused.value).startswith("p.yaml")
    path = tmp_path / "p.yaml"  # the same through a file
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ValueError) as from_file:
        load_category_protocol(path)
    assert message in str(from_file.value)


def test_unquoted_yes_and_no_keys_read_as_the_answers(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(MIXED).replace("'yes':", "yes:").replace("'no':", "no:"), encoding="utf-8")
    assert "yes:" in path.read_text()
    protocol = load_category_protocol(path)
    assert (protocol.yes, protocol.no) == (" Yes", " No")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: [unclosed", "not valid YAML"),
        (b"\xff\xfe\x00binary", "not valid YAML"),
        (b"[" * 5000, "not valid YAML"),
        (b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "unknown key"),
        (b"", "must be a mapping"),
        (b"x" * (64 * 1024 + 1), "larger than"),
    ],
    ids=["syntax", "not utf-8", "deep nesting", "aliases", "empty", "too large"],
)
def test_hostile_files_are_refused_with_a_message(tmp_path, content, message):
    path = tmp_path / "p.yaml"
    path.write_bytes(content)
    with pytest.raises(ValueError) as refused:
        load_category_protocol(path)
    assert message in str(refused.value)


def test_a_missing_file_a_folder_and_an_absurd_name_are_refused(tmp_path):
    for source in (tmp_path / "absent.yaml", tmp_path, "x" * 5000, "bad\x00name"):
        with pytest.raises(ValueError, match="neither a file nor a bundled protocol"):
            load_category_protocol(source)
