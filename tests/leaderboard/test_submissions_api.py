"""The submissions API and personal API tokens: the account page creates and revokes them, a revoked
one is refused everywhere with that reason, POST validates like the form, creating is throttled, and
the schema documents it all."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

from arena.catalogue.services import model_register
from leaderboard.models import ApiToken, SubmissionDraft
from tests.leaderboard import tus_helpers as tus

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(client):
    user = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "pw-long-enough-42")
    client.force_login(user)
    return user


def _create_token(client, name="laptop") -> str:
    page = client.post("/leaderboard/accounts/", {"action": "create", "name": name})
    assert page.status_code == 200 and page["Cache-Control"] == "no-store"
    raw = page.context["new_token"]
    assert raw.startswith("pdm_") and raw.encode() in page.content
    return raw


def test_account_page_creates_tokens_stored_hashed_and_revokes_them(client, owner, uploads_dir, tiny_dir):
    raw = _create_token(client)
    token = ApiToken.objects.get()
    assert token.prefix == raw[:12] and raw not in (token.digest, token.prefix) and len(token.digest) == 64
    page = client.get("/leaderboard/accounts/")
    assert raw.encode() not in page.content and token.prefix.encode() in page.content  # shown once
    assert client.post("/leaderboard/accounts/", {"action": "create", "name": "  "}).status_code == 400
    client.logout()
    bearer = {"Authorization": f"Bearer {raw}"}
    created = tus.create_draft(client, tus.declared(tiny_dir), headers=bearer)
    assert created.status_code == 201, created.content
    draft_id = created.json()["id"]
    url = tus.create_upload(client, draft_id, "config.json", (tiny_dir / "config.json").stat().st_size, bearer)["Location"]
    assert client.head(url, headers={**tus.TUS, **bearer}).status_code == 200
    assert client.get(f"/api/submissions/{draft_id}/", headers=bearer).json()["status"] == "UPLOADING"
    ApiToken.objects.update(last_used_at=None)

    client.force_login(owner)
    other = get_user_model().objects.create_user("o@example.org", "o@example.org", "pw-long-enough-42")
    other_token = ApiToken.objects.create(owner=other, name="x", prefix="pdm_xxxxxxxx", digest="0" * 64)
    assert client.post("/leaderboard/accounts/", {"action": "revoke", "token": other_token.pk}).status_code == 400
    assert client.post("/leaderboard/accounts/", {"action": "revoke", "token": token.pk}).status_code == 200
    client.logout()
    for response in (
        tus.create_draft(client, tus.declared(tiny_dir), headers=bearer),
        client.get(f"/api/submissions/{draft_id}/", headers=bearer),
        tus.patch(client, url, 0, (tiny_dir / "config.json").read_bytes(), bearer),
        client.head(url, headers={**tus.TUS, **bearer}),
    ):
        assert response.status_code == 401
        if response.content:
            assert "was revoked on" in response.json()["detail"]
    assert (uploads_dir / draft_id / "config.json").stat().st_size == 0  # nothing was written
    assert tus.create_draft(client, tus.declared(tiny_dir), headers={"Authorization": "Bearer pdm_guess"}).status_code == 401


def test_post_validates_like_the_form(client, owner, uploads_dir, tiny_dir):
    files = tus.declared(tiny_dir)
    bad_fields = tus.create_draft(client, files, model_name="../etc", model_type="fine-tuned")
    errors = bad_fields.json()
    assert bad_fields.status_code == 400 and "model_name" in errors and "base_model" in errors
    for hostile, message in (
        ({**files, "pytorch_model.bin": 10}, "only safetensors weights"),
        ({**files, "../x.json": 10}, "path separator"),
        ({k: v for k, v in files.items() if k != "config.json"}, "config.json is missing"),
        ({**files, "model.safetensors": -1}, "positive number"),
        ({**files, "model.safetensors": 1 << 60}, "at most"),
        ("not a dict", "Declare the checkpoint's files"),
    ):
        response = tus.create_draft(client, hostile)
        assert response.status_code == 400 and message in str(response.json()), hostile
    model_register(name="acme/taken")
    taken = tus.create_draft(client, files, model_name="acme/taken")
    assert taken.status_code == 400 and "already taken" in taken.json()["non_field_errors"][0]
    assert SubmissionDraft.objects.count() == 0
    client.logout()
    assert tus.create_draft(client, files).status_code == 401


def test_submissions_receiving_files_at_once_are_limited(client, owner, uploads_dir, tiny_dir, settings):
    settings.LEADERBOARD_UPLOADS_IN_PROGRESS = 2
    codes = [tus.create_draft(client, tus.declared(tiny_dir), model_name=f"acme/m{i}").status_code for i in range(3)]
    assert codes == [201, 201, 400]
    SubmissionDraft.objects.filter(owner=owner).first().delete()
    assert tus.create_draft(client, tus.declared(tiny_dir), model_name="acme/m3").status_code == 201


def test_creating_submissions_is_throttled(client, owner, uploads_dir, tiny_dir, monkeypatch):
    cache.clear()
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"anon": "100/minute", "user": "100/minute", "submissions": "2/minute",
                                                             "submissions_refused": "100/minute"})  # fmt: skip
    codes = [tus.create_draft(client, tus.declared(tiny_dir), model_name=f"acme/m{i}").status_code for i in range(3)]
    assert codes == [201, 201, 429]
    assert client.get("/api/submissions/").status_code == 200  # reading is not held back by the POST throttle
    cache.clear()


def test_refused_attempts_do_not_use_up_the_creation_quota(client, owner, uploads_dir, tiny_dir, monkeypatch):
    cache.clear()
    rates = {"anon": "100/minute", "user": "100/minute", "submissions": "2/minute", "submissions_refused": "4/minute"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    typo = [tus.create_draft(client, tus.declared(tiny_dir), model_name="acme/m", licence="").status_code for _ in range(3)]
    assert typo == [400, 400, 400]  # an owner fixing a form is not locked out of creating
    created = [tus.create_draft(client, tus.declared(tiny_dir), model_name=f"acme/ok{i}").status_code for i in range(3)]
    assert created == [201, 201, 429]
    # a client looping on errors is slowed by the higher refused-attempts limit
    cache.clear()
    loop = [client.post("/api/submissions/", data="[]", content_type="application/json").status_code for _ in range(5)]
    assert loop == [400, 400, 400, 400, 429]
    cache.clear()


def test_the_schema_documents_the_api(client):
    schema = client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    assert "post" in schema["paths"]["/api/submissions/"]
    assert "get" in schema["paths"]["/api/submissions/{public_id}/"]
    assert schema["components"]["securitySchemes"]["apiToken"]["scheme"] == "bearer"


def test_admin_lists_drafts_and_revokes_tokens(client, owner, uploads_dir, tiny_dir):
    raw = _create_token(client)
    draft_id = tus.create_draft(client, tus.declared(tiny_dir)).json()["id"]
    admin_user = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-long-enough-42")
    client.force_login(admin_user)
    assert draft_id.encode() in client.get("/admin/leaderboard/submissiondraft/").content
    assert raw.encode() not in client.get("/admin/leaderboard/apitoken/").content
    token = ApiToken.objects.get()
    response = client.post("/admin/leaderboard/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_weights_submitted_before_are_refused_before_any_byte(client, owner, uploads_dir, tiny_dir):
    """A client that sends the weights' digest (weight_sha256) is told at once that the owner submitted
    these weights before, with a link to that submission; another account's weights are not revealed
    by a digest (their duplicate is refused when the bytes arrive)."""
    import hashlib

    from leaderboard.models import Submission

    hasher = hashlib.sha256()  # as docs/uploads.md describes it: name, NUL, bytes, in name order
    for path in sorted(tiny_dir.glob("*.safetensors"), key=lambda p: p.name):
        hasher.update(path.name.encode() + b"\0" + path.read_bytes())
    digest = hasher.hexdigest()
    files = tus.declared(tiny_dir)
    first = tus.create_draft(client, files, model_name="acme/first", weight_sha256=digest)
    assert first.status_code == 201, first.content  # nothing submitted yet: the upload may start
    for name, data in ((n, (tiny_dir / n).read_bytes()) for n in sorted(files)):
        tus.send_file(client, first.json()["id"], name, data)
    submission = Submission.objects.get(model_name="acme/first")
    assert submission.weight_sha256 == digest  # the client's digest is the server's

    drafts = SubmissionDraft.objects.count()
    again = tus.create_draft(client, files, model_name="acme/again", weight_sha256=digest)
    assert again.status_code == 409
    body = again.json()
    assert "You already submitted these weights as acme/first" in body["files"][0]
    assert body["existing_submission"] == f"/leaderboard/submissions/{submission.public_id}/"
    assert client.get(body["existing_submission"]).status_code == 200
    assert SubmissionDraft.objects.count() == drafts  # nothing created, so nothing can be sent

    for hostile in (digest.upper(), digest[:-1], digest + "0", "z" * 64, 12, ["a" * 64], {"sha": digest}, ""):
        refused = tus.create_draft(client, files, model_name="acme/hostile", weight_sha256=hostile)
        assert refused.status_code == 400 and "64 lowercase hexadecimal" in str(refused.json()), hostile
    assert SubmissionDraft.objects.count() == drafts

    # Someone else's digest proves nothing before the bytes: the draft is made; the bytes are refused.
    other = get_user_model().objects.create_user("other@example.org", "other@example.org", "pw-long-enough-42")
    client.force_login(other)
    theirs = tus.create_draft(client, files, model_name="other/copy", weight_sha256=digest)
    assert theirs.status_code == 201 and "existing_submission" not in theirs.json()
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.FAILED, failure_reason="the run failed")
    client.force_login(owner)  # a failed submission may be sent again
    assert tus.create_draft(client, files, model_name="acme/retry", weight_sha256=digest).status_code == 201
