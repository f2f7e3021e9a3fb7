"""One public id per object (common.public_ids, docs/api.md "Ids"): a submission's 22 characters and a
battle's 32 hex digits are the same string in every URL, export and API field; the ids earlier versions
published redirect; a model name names one live submission or upload at a time."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from arena.publication.holds import battles_moderate
from leaderboard.models import EvaluationRun, Submission
from tests.arena.vote_data import votes_create
from tests.leaderboard import board_data as bd
from tests.leaderboard import tus_helpers as tus

pytestmark = pytest.mark.django_db


@pytest.fixture
def entries(db):
    alice = bd.user("alice@example.org")
    a = bd.entry(alice, "acme/a", gsm8k=bd.pattern(30, 20))
    private = bd.entry(alice, "acme/private", gsm8k=bd.pattern(30, 25), private=True)
    return {"alice": alice, "a": a, "private": private}


def test_a_submission_is_its_public_id_everywhere(client, entries):
    a = entries["a"]
    listed = client.get("/api/submissions/").json()["results"]
    assert [m["id"] for m in listed] == [a.public_id]
    assert {s["submission"] for s in client.get("/api/scores/").json()["results"]} == {a.public_id}
    runs = client.get(f"/api/runs/?submission={a.public_id}").json()["results"]
    assert runs and {r["submission"] for r in runs} == {a.public_id}
    assert client.get(f"/api/runs/{runs[0]['id']}/").json()["submission"] == a.public_id
    table = list(
        csv.DictReader(
            io.StringIO(b"".join(client.get("/leaderboard/scores.csv").streaming_content).decode())
        )
    )
    assert {row["submission_id"] for row in table} == {a.public_id}
    everything = b"".join(client.get("/leaderboard/all-scores.csv").streaming_content).decode()
    assert {row["submission_id"] for row in csv.DictReader(io.StringIO(everything))} == {a.public_id}
    assert client.get(f"/api/submissions/{listed[0]['id']}/").json()["id"] == a.public_id
    schema = client.get("/api/schema/?format=json").json()
    assert "public id" in schema["components"]["schemas"]["Submission"]["properties"]["id"]["description"]


def test_row_numbers_of_earlier_versions_redirect_where_visible(client, entries):
    a, private = entries["a"], entries["private"]
    for old, new in (
        (f"/api/scores/?submission={a.pk}&limit=5", f"/api/scores/?submission={a.public_id}&limit=5"),
        (f"/api/runs/?submission={a.pk}", f"/api/runs/?submission={a.public_id}"),
        (f"/api/submissions/{a.pk}/", f"/api/submissions/{a.public_id}/"),
    ):
        response = client.get(old)
        assert response.status_code == 301 and response["Location"] == new, old
        assert client.get(response["Location"]).status_code == 200
    # a private submission's row number is not redirected (nobody learns it exists): no rows, or a 404
    assert client.get(f"/api/scores/?submission={private.pk}").json()["count"] == 0
    assert client.get(f"/api/submissions/{private.pk}/").status_code == 404
    assert client.get("/api/submissions/999999999/").status_code == 404
    owner = Client()
    owner.force_login(entries["alice"])
    assert (
        owner.get(f"/api/submissions/{private.pk}/")["Location"] == f"/api/submissions/{private.public_id}/"
    )
    # staff review pages too
    staff = Client()
    staff.force_login(bd.user("staff@example.org", staff=True))
    response = staff.get(f"/leaderboard/review/{a.pk}/scan/")
    assert response.status_code == 301 and response["Location"] == f"/leaderboard/review/{a.public_id}/scan/"
    assert staff.get(f"/leaderboard/review/{a.public_id}/").status_code == 200
    assert client.get(f"/leaderboard/review/{a.pk}/").status_code in (302, 404)  # not staff: the login


def test_a_battle_is_its_hex_id_everywhere_and_dashed_urls_redirect(settings):
    settings.ARENA_PUBLISH_DELAY_S = 0
    vote = votes_create({"a": 0.0, "b": 0.0}, 1, with_turns=True)[0]
    from arena.models import RatingSnapshot

    RatingSnapshot.objects.create(
        method="bt", category="overall", vote_count=1, last_vote_at=timezone.now(), rows=[]
    )
    battles_moderate()
    battle = vote.battle
    client = Client()
    listed = client.get("/api/battles/").json()["results"]
    assert [b["public_id"] for b in listed] == [battle.public_id.hex]
    csv_ids = [row["question_id"] for row in csv.DictReader(io.StringIO(
        b"".join(client.get("/api/votes.csv").streaming_content).decode()))]  # fmt: skip
    assert csv_ids == [battle.public_id.hex]
    assert client.get(f"/api/battles/{battle.public_id.hex}/").json()["public_id"] == battle.public_id.hex
    dashed = client.get(f"/api/battles/{battle.public_id}/?x=1")
    assert dashed.status_code == 301 and dashed["Location"] == f"/api/battles/{battle.public_id.hex}/?x=1"
    # a write to an earlier URL keeps its method and body (308), without a CSRF token of its own
    csrf = Client(enforce_csrf_checks=True)
    moved = csrf.post(f"/arena/battles/{uuid.uuid4()}/vote/", {"winner": "tie"})
    assert moved.status_code == 308 and moved["Location"].endswith("/vote/") and "-" not in moved["Location"]
    for bad in (battle.public_id.hex.upper(), battle.public_id.hex[:-1], "z" * 32):
        assert client.get(f"/api/battles/{bad}/").status_code == 404, bad


def test_one_live_submission_or_upload_per_name(client, uploads_dir, tiny_dir):
    owner = get_user_model().objects.create_user("o@example.org", "o@example.org", "pw-long-enough-42")
    client.force_login(owner)
    first = tus.create_draft(client, tus.declared(tiny_dir))
    assert first.status_code == 201, first.content
    again = tus.create_draft(client, tus.declared(tiny_dir))
    assert again.status_code == 400 and "still arriving" in again.json()["non_field_errors"][0]
    other_name = tus.create_draft(client, tus.declared(tiny_dir), model_name="acme/tiny-llama-v2")
    assert other_name.status_code == 201
    # the submit form and the API say so
    assert "one submission or upload at a time" in client.get("/leaderboard/submit/").content.decode()
    schema = client.get("/api/schema/?format=json").json()
    assert (
        "new name"
        in schema["components"]["schemas"]["SubmissionCreate"]["properties"]["model_name"]["description"]
    )


def test_a_finished_name_is_refused_and_a_failed_one_freed(client, uploads_dir, tiny_dir):
    owner = bd.user("owner@example.org")
    client.force_login(owner)
    done = bd.entry(owner, "acme/tiny-llama", gsm8k=bd.pattern(10, 5))
    refused = tus.create_draft(client, tus.declared(tiny_dir))
    assert refused.status_code == 400 and "already have a submission named" in str(refused.json())
    Submission.objects.filter(pk=done.pk).update(status="FAILED", failure_reason="out of memory")
    EvaluationRun.objects.filter(submission=done).delete()
    assert tus.create_draft(client, tus.declared(tiny_dir)).status_code == 201
