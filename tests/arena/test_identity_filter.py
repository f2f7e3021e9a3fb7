"""The identity filter: names, aliases, families and makers, insensitive to case and separators, as whole
words, plus self-identification; common words and longer words do not match. Through the vote service:
the vote is kept, not counted, and the catalogue's aliases and maker are read from the database."""

from __future__ import annotations

import uuid

import pytest

from arena.catalogue.sync import catalogue_parse
from arena.models import Battle, LanguageModel, Turn, Vote
from arena.play.reveals import model_terms, reveals_identity
from arena.votes import casting
from evalcore.ratings import prompt_key

GPT = model_terms("gpt-4o-mini", "gpt-4o", ["ChatGPT"], "OpenAI")
SMOL = model_terms("SmolLM2-135M-Instruct", "", [], "HuggingFace")
LLAMA = model_terms("llama-3-8b-instruct", "llama", [], "Meta")


@pytest.mark.parametrize(
    ("terms", "answer"),
    [
        (GPT, "Sure! I'm GPT-4o mini, here to help."),
        (GPT, "This answer comes from gpt4o-mini."),
        (GPT, "GPT 4o Mini can do that."),
        (GPT, "As ChatGPT, I cannot browse."),
        (GPT, "I was trained by OpenAI."),
        (GPT, "I am an OpenAI model."),
        (GPT, "(openai) says hello"),
        (SMOL, "I am SmolLM2, a small model."),
        (SMOL, "Hi, I'm Smol LM 2."),
        (SMOL, "I was developed by Hugging Face."),
        (SMOL, "My name is SmolLM2-135M."),
        (SMOL, "I'm Smol, nice to meet you."),
        (model_terms("qwen2.5-7b"), "I am Qwen, created by a cloud company."),
        (SMOL, "I am smollm2-135m-instruct."),
        (LLAMA, "As Llama, I think the answer is 4."),
        (LLAMA, "I'm a model made by Meta."),
        (LLAMA, "Meta's research team built me."),
        (LLAMA, "I am LLaMA 3, an assistant."),
        (LLAMA, "I AM LLAMA-3-8B-INSTRUCT"),
    ],
)
def test_answers_that_give_the_model_away(terms, answer):
    assert reveals_identity(terms, [answer])


@pytest.mark.parametrize(
    ("terms", "answer"),
    [
        (LLAMA, "The file's metadata lists the author."),
        (LLAMA, "A meta-analysis of 40 studies found no effect."),
        (LLAMA, "Llamas are domesticated South American camelids."),
        (LLAMA, "Metallica released a new album."),
        (GPT, "I am happy to help with that."),
        (GPT, "I'm sorry, I cannot do that."),
        (GPT, "As a result, the sum is 12."),
        (GPT, "As an AI assistant, I have no opinions."),
        (GPT, "I am not sure; an open question."),
        (GPT, "The GPT-4 paper came out in 2023."),  # another model's name, not this one's
        (GPT, "gpt-4o-minimal is not a model."),
        (SMOL, "I am a small dog."),
        (model_terms("gemma-2b"), "I am gem-cutter."),  # a start of the name, but not a whole part of it
        (SMOL, "Hug your face."),
        (model_terms("ab", "", [], ""), "ab ab ab"),  # terms under three characters are ignored
    ],
)
def test_ordinary_answers_are_not_flagged(terms, answer):
    assert not reveals_identity(terms, [answer])


def test_bad_catalogue_values_do_not_break_matching():
    assert model_terms("x-model", "", "not a list", "") == ["x-model"]
    assert model_terms("x-model", "", [3, None, " ", "X Model Alias"], "") == ["x-model", "X Model Alias"]
    assert not reveals_identity(["((", "[a-z]+", "."], ["anything [a-z]+ at all"])  # escaped, too short parts
    assert reveals_identity(["c++ model"], ["I'm c model, hi"]) is True  # parts: c, model


def test_catalogue_file_takes_aliases_and_maker(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  - name: m1\n    backend: hf\n    model_args: {path: x}\n    aliases: [Model One]\n"
        "    maker: Acme\n"
    )
    entry = catalogue_parse(path)[0]
    assert entry["aliases"] == ["Model One"] and entry["maker"] == "Acme"
    path.write_text("models:\n  - name: m1\n    backend: hf\n    model_args: {path: x}\n    aliases: Model One\n")
    with pytest.raises(ValueError, match="aliases: must be a list"):
        catalogue_parse(path)
    path.write_text("models:\n  - name: m1\n    backend: hf\n    model_args: {path: x}\n    maker: [1]\n")
    with pytest.raises(ValueError, match="maker: must be text"):
        catalogue_parse(path)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("answer", "counted"),
    [("Hello, I am GPT 4o mini!", False), ("I was built by Hugging Face.", False), ("Paris, in metadata.", True)],
)
def test_vote_service_reads_aliases_and_makers_and_keeps_the_vote(answer, counted):
    a = LanguageModel.objects.create(name="gpt-4o-mini", maker="OpenAI", aliases=["ChatGPT"], in_arena=True)
    b = LanguageModel.objects.create(name="smollm2-135m", maker="HuggingFace", aliases=["SmolLM2"], in_arena=True)
    meta = LanguageModel.objects.create(name="llama-x", maker="Meta", in_arena=True)
    battle = Battle.objects.create(public_id=uuid.uuid4(), model_a=a, model_b=b if counted is False else meta,
                                   session_hash="s", ip_hash="i")  # fmt: skip
    Turn.objects.create(battle=battle, index=0, prompt="  Capital of   FRANCE? ", answer_a=answer, answer_b="Paris.",
                        status_a="done", status_b="done")  # fmt: skip
    cast = casting.vote_cast(public_id=battle.public_id, winner="model_a", session_hash="s", ip_hash="i")
    vote = Vote.objects.get(pk=cast.id)
    assert vote.counted is counted and cast.counted is counted
    assert vote.excluded_reason == ("" if counted else "identity_revealed")
    assert vote.prompt_hash == prompt_key(["capital of france?"])
