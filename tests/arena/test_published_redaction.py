"""Personal data and secrets typed into real battles never reach the public: /api/battles/ (list and
detail) serves redacted texts, stored once per redactor version by the refit, recomputed when that
version changes, and never served raw even before it is stored."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from arena.models import Battle, Turn
from arena.play import generation
from arena.publication import redaction
from arena.publication import redaction as arena_redaction
from arena.tasks import ratings_refit
from evalcore.privacy.planted import planted_items
from tests.arena.vote_data import catalogue
from tests.arena_terms import agree

pytestmark = pytest.mark.django_db


COARSE = ("email", "phone_international", "card_visa", "iban", "ipv4", "token_url", "github_token",
          "pem_private_key", "aws_secret_access_key", "person_name", "street_address", "us_ssn")  # fmt: skip


def planted_values() -> list[tuple[str, str, str]]:
    """(kind, value, the planted sentence) for one value of each of a dozen kinds (evalcore/privacy/planted.py)."""
    seen: dict[str, tuple[str, str]] = {}
    for item in planted_items():
        for kind, value in item.planted:
            if kind in COARSE:
                seen.setdefault(kind, (value, item.text))
    return sorted((kind, value, text) for kind, (value, text) in seen.items())


def battle_with(prompt: str, answer_a: str, answer_b: str, django_capture_on_commit_callbacks) -> Battle:
    voter = Client()
    voter.get("/arena/")
    agree(voter)
    with django_capture_on_commit_callbacks(execute=False):
        created = voter.post("/arena/battles/", {"prompt": prompt})
    assert created.status_code == 201, created.content
    battle = Battle.objects.get(public_id=created.json()["battle"])
    turn = Turn.objects.get(battle=battle)
    generation.turn_side_finish(turn.pk, "a", answer_a)
    generation.turn_side_finish(turn.pk, "b", answer_b)
    with django_capture_on_commit_callbacks(execute=False):
        assert voter.post(f"/arena/battles/{battle.public_id.hex}/vote/", {"winner": "model_a"}).status_code == 201
    return battle


def test_planted_personal_data_never_reaches_the_battles_api(settings, django_capture_on_commit_callbacks):
    settings.ARENA_PUBLISH_DELAY_S = 0
    settings.ARENA_REFIT_MIN_VOTES = 1
    catalogue("left-model", "right-model")
    values = planted_values()
    assert {kind for kind, _, _ in values} == set(COARSE)
    prompt = "Please rewrite this: " + "\n".join(text for _, _, text in values[:4])
    answer_a = "Sure:\n" + "\n".join(text for _, _, text in values[4:])
    answer_b = f"I won't repeat {values[0][1]}, but here is a <b>{values[-1][2]}</b>"
    battle = battle_with(prompt, answer_a, answer_b, django_capture_on_commit_callbacks)
    assert Turn.objects.get(battle=battle).prompt == prompt  # the stored original is never changed

    summary = ratings_refit()
    assert summary["turns_redacted"] == 1
    stored = Turn.objects.get(battle=battle).redacted
    assert stored["version"] == arena_redaction.REDACTOR_VERSION and sum(stored["found"].values()) >= len(values)

    listing = Client().get("/api/battles/?limit=1000")
    detail = Client().get(f"/api/battles/{battle.public_id.hex}/")
    assert listing.status_code == detail.status_code == 200
    for body in (listing.content.decode(), detail.content.decode()):
        for kind, value, _ in values:
            for piece in [value] + [part for part in value.split() if len(part) >= 8]:
                assert piece not in body, (kind, piece)
        assert "<EMAIL>" in body or "\\u003cEMAIL\\u003e" in body
    turn = detail.json()["turns"][0]
    assert turn["prompt"].startswith("Please rewrite this: ") and "<" in turn["answer_a"]


def test_a_new_redactor_version_redacts_again_and_nothing_is_served_raw_meanwhile(
    settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.ARENA_PUBLISH_DELAY_S = 0
    settings.ARENA_REFIT_MIN_VOTES = 1
    catalogue("left-model", "right-model")
    battle = battle_with("mail me: jane.roe@example.org", "ok", "fine", django_capture_on_commit_callbacks)
    ratings_refit()
    Turn.objects.filter(battle=battle).update(redacted={"version": "old", "prompt": "stale", "answer_a": "", "answer_b": ""})
    body = Client().get(f"/api/battles/{battle.public_id.hex}/").json()
    assert body["turns"][0]["prompt"] == "mail me: <EMAIL>"  # computed on the spot, not the stale copy
    call_command("arena_redact")
    assert Turn.objects.get(battle=battle).redacted["prompt"] == "mail me: <EMAIL>"
    monkeypatch.setattr(arena_redaction, "REDACTOR_VERSION", "podium-redact-test")
    from arena.publication import redaction as service_redaction
    from evalcore.privacy import redact as redact_module

    monkeypatch.setattr(service_redaction, "REDACTOR_VERSION", "podium-redact-test")
    monkeypatch.setattr(redact_module, "REDACTOR_VERSION", "podium-redact-test")
    assert redaction.published_redact() == 1
    assert Turn.objects.get(battle=battle).redacted["version"] == "podium-redact-test"


def test_exports_carry_no_text_and_hostile_texts_publish_without_error(settings, django_capture_on_commit_callbacks):
    settings.ARENA_PUBLISH_DELAY_S = 0
    settings.ARENA_REFIT_MIN_VOTES = 1
    catalogue("left-model", "right-model")
    hostile = "<div>" * 3000 + "\x01\x02\ufffd" * 500 + " ana@example.com " + "[" * 2000 + "x" * 20_000
    prompt = "<b>" * 500 + "\x01\x02" * 200 + " ana@example.com " + "[" * 500
    battle = battle_with(prompt, hostile, "sk-proj-" + "a" * 40, django_capture_on_commit_callbacks)
    ratings_refit()
    detail = Client().get(f"/api/battles/{battle.public_id.hex}/")
    assert detail.status_code == 200
    body = detail.content.decode()
    assert "ana@example.com" not in body and "sk-proj-" not in body
    for path in ("/api/votes.csv", "/api/votes.jsonl", "/api/battles/?limit=1000"):
        response = Client().get(path)
        assert response.status_code == 200
        content = b"".join(response.streaming_content) if response.streaming else response.content
        assert b"ana@example.com" not in content and b"sk-proj-" not in content


def test_a_pasted_cloud_secret_and_a_typed_password_are_never_published(settings, django_capture_on_commit_callbacks):
    # Issue 48: the AWS secret access key typed beside its key id was published raw by /api/battles/.
    settings.ARENA_PUBLISH_DELAY_S = 0
    settings.ARENA_REFIT_MIN_VOTES = 1
    catalogue("left-model", "right-model")
    key_id, secret, password = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Sommer2024!x"
    prompt = f"why does boto fail? aws_access_key_id {key_id} and my secret {secret}; my password is {password}"
    battle = battle_with(prompt, f"Your key {secret} looks valid.", f"Never share {password} or {key_id}.",
                         django_capture_on_commit_callbacks)  # fmt: skip
    for body in (Client().get("/api/battles/?limit=1000").content.decode(),
                 Client().get(f"/api/battles/{battle.public_id.hex}/").content.decode()):  # fmt: skip
        for value in (key_id, secret, secret.split("/")[0], password.rstrip("!x")):
            assert value not in body, value
    ratings_refit()
    stored = Turn.objects.get(battle=battle).redacted
    assert stored["found"]["SECRET"] >= 5 and secret not in str(stored)
