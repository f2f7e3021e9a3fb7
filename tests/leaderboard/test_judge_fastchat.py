"""FastChat's ``judge_prompts.jsonl`` pasted as a judge config's protocol (leaderboard/judging/configs.py):
the config grades with FastChat's four single-answer judges (or compares pairs with ``pair-v2``), its
page says the wording is FastChat's format and whether it is FastChat's published text, names every
member with its hash and says how verdicts are read; malformed or ill-fitting prompts are refused
naming the field."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from leaderboard.judging.configs import grading_protocols_of, protocol_of
from leaderboard.judging.services import judge_config_save
from leaderboard.models import JudgeConfig
from tests.evalcore.judging.test_fastchat_prompts import PROMPTS
from tests.leaderboard.judging_data import catalogue_model

pytestmark = pytest.mark.django_db

PASTED = "".join(json.dumps(r) + "\n" for r in PROMPTS)
SINGLES = "".join(json.dumps(r) + "\n" for r in PROMPTS if r["type"] == "single")


def config(smollm2_dir, **fields) -> JudgeConfig:
    return JudgeConfig(name=fields.pop("name", "fastchat"), judge_backend="hf",
                       judge_model_args={"path": str(smollm2_dir), "dtype": "float32"}, max_new_tokens=8, **fields)  # fmt: skip


def test_fastchat_single_answer_judges_on_a_config_and_its_page(smollm2_dir, client):
    saved = judge_config_save(config(smollm2_dir, protocol_yaml=PASTED, protocol_name="single-v1"))
    assert saved.kind == "single" and saved.questions_file == "sample"
    family = grading_protocols_of(saved)
    assert [getattr(family, r).name for r in ("single", "single_multi", "reference", "reference_multi")] == [
        "single-v1", "single-v1-multi-turn", "single-math-v1", "single-math-v1-multi-turn"]  # fmt: skip
    assert all(getattr(family, r).verdict.fastchat for r in ("single", "single_multi", "reference", "reference_multi"))
    # the file holds only single-answer prompts: no name needed
    alone = judge_config_save(config(smollm2_dir, name="singles", protocol_yaml=SINGLES))
    assert grading_protocols_of(alone).sha256 == family.sha256 and alone.protocol_sha256 == saved.protocol_sha256

    page = client.get(reverse("leaderboard:judge", args=[saved.pk])).content.decode()
    assert "FastChat judge_prompts.jsonl format" in page and "not a prompt FastChat has published" in page
    assert "read as FastChat's llm_judge reads it: the first <code>[[n]]</code>, else the first <code>[n]</code>" in page
    for role in ("single-v1-multi-turn", "single-math-v1", "single-math-v1-multi-turn"):
        member = getattr(family, {"single-v1-multi-turn": "single_multi", "single-math-v1": "reference",
                                  "single-math-v1-multi-turn": "reference_multi"}[role])  # fmt: skip
        assert role in page and member.sha256 in page
    listing = client.get(reverse("leaderboard:judges")).content.decode()
    assert "FastChat prompts (single-v1)" in listing
    saved.protocol_yaml = "\n  " + PASTED  # pasted with a blank line first: still FastChat's
    saved.save()
    assert client.get(reverse("leaderboard:judges")).content.decode().count("FastChat prompts (single-v1)") == 1
    api = client.get(f"/api/judges/{saved.pk}/").json()
    protocols = api.get("protocols") or api["config"]["protocols"]
    assert [(p["role"], p["name"], p["sha256"], p["verdict_parse"]) for p in protocols] == [
        (role, getattr(family, role).name, getattr(family, role).sha256, "fastchat")
        for role in ("single", "single_multi", "reference", "reference_multi")]  # fmt: skip
    assert all("not a prompt FastChat has published" in p["source"] for p in protocols)

    # Podium's own wording says so on its page.
    own = judge_config_save(config(smollm2_dir, name="own", protocol_name="mt-bench-single"))
    page = client.get(reverse("leaderboard:judge", args=[own.pk])).content.decode()
    assert "Podium&#x27;s own wording, after FastChat&#x27;s single-v1" in page
    api = client.get(f"/api/judges/{own.pk}/").json()
    protocols = api.get("protocols") or api["config"]["protocols"]
    assert [p["name"] for p in protocols] == ["mt-bench-single", "mt-bench-single-multi", "mt-bench-single-reference",
                                              "mt-bench-single-reference-multi"]  # fmt: skip
    assert {p["verdict_parse"] for p in protocols} == {"podium"}


def test_fastchat_pairwise_judge_on_a_config(smollm2_dir, client):
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    saved = judge_config_save(config(smollm2_dir, protocol_yaml=PASTED, protocol_name="pair-v2", baseline=baseline))
    protocol = protocol_of(saved)
    assert saved.kind == "pairwise" and protocol.name == "pair-v2" and saved.protocol_sha256 == protocol.sha256
    page = client.get(reverse("leaderboard:judge", args=[saved.pk])).content.decode()
    assert "the first of <code>[[A]]</code>, <code>[[B]]</code>, <code>[[C]]</code> (tie) found in the text" in page


@pytest.mark.parametrize(("fields", "message"), [
    ({"protocol_yaml": PASTED}, "put the prompt to use in the protocol name"),
    ({"protocol_yaml": PASTED, "protocol_name": "no-such"}, "no prompt named 'no-such'"),
    ({"protocol_yaml": PASTED, "protocol_name": "pair-v2-multi-turn"}, "two-turn conversations"),
    ({"protocol_yaml": PASTED, "protocol_name": "single-v1-multi-turn"}, "nor a one-turn single-answer protocol"),
    ({"protocol_yaml": PASTED.replace("{answer}", "{answr}", 1)}, "{answr} is not one FastChat fills"),
    ({"protocol_yaml": PASTED + '{"prompt_template": 1}\n'}, "line 9"),
    ({"protocol_yaml": PASTED + PASTED.splitlines()[0]}, "also on line 1"),
])  # fmt: skip
def test_ill_fitting_fastchat_prompts_are_refused_naming_the_field(smollm2_dir, fields, message):
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    with pytest.raises(ValidationError) as caught:
        judge_config_save(config(smollm2_dir, baseline=baseline if "pair" in fields.get("protocol_name", "") else None,
                                 **fields))  # fmt: skip
    assert message in str(caught.value.message_dict.get("protocol_yaml")), caught.value.message_dict
    assert not JudgeConfig.objects.exists()


def test_a_reference_guided_prompt_alone_needs_a_reference_for_every_question(smollm2_dir):
    with_ref = {"id": "add", "text": "What is 17 + 25?", "category": "math", "reference": "42"}
    without = {"id": "hello", "text": "Say hello.", "category": "writing"}
    fields = {"protocol_yaml": SINGLES, "protocol_name": "single-math-v1"}
    saved = judge_config_save(config(smollm2_dir, instructions=[with_ref], **fields))
    family = grading_protocols_of(saved)
    assert family.all_guided and family.single.name == "single-math-v1"
    with pytest.raises(ValidationError) as caught:
        judge_config_save(config(smollm2_dir, name="mixed", instructions=[with_ref, without], **fields))
    assert "question 'hello' has none" in str(caught.value.message_dict["instructions"])
    with pytest.raises(ValidationError) as caught:
        judge_config_save(config(smollm2_dir, name="none", instructions=[with_ref], reference_mode="none", **fields))
    assert "grades against reference answers only" in str(caught.value.message_dict["reference_mode"])
    # judge-written references serve every question
    judged = judge_config_save(config(smollm2_dir, name="judged", instructions=[with_ref, without],
                                      reference_mode="judge", **fields))  # fmt: skip
    assert judged.pk is not None
