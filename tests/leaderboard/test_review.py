"""The admins' review queue: who may see it, decisions with a required comment (written with their
audit row in one transaction), the board's view of each state, the log on the model's page, and
Django admin's way in."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from leaderboard.models import ReviewAction, Submission
from leaderboard.review.services import submission_review
from leaderboard.submissions.services import duplicate_check, variant_review_reason
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db


@pytest.fixture
def flagged(settings):
    settings.LEADERBOARD_PRIVATE_VARIANTS_LIMIT = 3
    owner = bd.user("owner@example.org")
    for i in range(4):
        bd.entry(owner, f"acme/variant-{i}", gsm8k=bd.pattern(20, 10 + i), private=True, model_type="fine-tuned",
                 base_model="acme/base-1b")  # fmt: skip
    reason = variant_review_reason(owner, "acme/base-1b")
    assert reason.startswith("4 private variants of acme/base-1b")
    entry = bd.entry(owner, "acme/public", gsm8k=bd.pattern(20, 15), model_type="fine-tuned", base_model="acme/base-1b",
                     review="flagged")  # fmt: skip
    Submission.objects.filter(pk=entry.pk).update(review_reason=reason)
    contaminated = bd.entry(
        bd.user("other@example.org"), "other/model", gsm8k=bd.pattern(20, 19), review="flagged"
    )
    Submission.objects.filter(pk=contaminated.pk).update(
        review_reason="suspected contamination: gsm8k 13-gram overlap 41%"
    )
    return {"entry": entry, "contaminated": contaminated, "owner": owner}


@pytest.fixture
def staff(client):
    user = bd.user("staff@example.org", staff=True)
    client.force_login(user)
    client.user = user
    return client


def board_ids(client, query: str = "") -> list[int]:
    """Primary keys of the board's rows (the page names each by its opaque public id)."""
    html = client.get(f"/leaderboard/{query}").content.decode()
    public_ids = re.findall(r'<tr data-submission="([A-Za-z0-9_-]{22})"', html)
    by_public_id = dict(Submission.objects.filter(public_id__in=public_ids).values_list("public_id", "pk"))
    return [by_public_id[x] for x in public_ids]


def test_only_staff_see_the_queue(client, flagged):
    response = client.get("/leaderboard/review/")
    assert response.status_code == 302 and response["Location"].startswith("/leaderboard/accounts/login/")
    client.force_login(flagged["owner"])
    for url in (
        "/leaderboard/review/",
        f"/leaderboard/review/{flagged['entry'].public_id}/",
        "/leaderboard/review/rescore/",
    ):
        assert client.get(url).status_code == 404, url
    response = client.post(
        f"/leaderboard/review/{flagged['entry'].public_id}/", {"action": "approve", "comment": "mine"}
    )
    assert response.status_code == 404 and not ReviewAction.objects.exists()


def test_queue_lists_flagged_submissions_with_their_reasons(staff, flagged):
    html = staff.get("/leaderboard/review/").content.decode()
    assert html.count('class="review"') == 2
    assert "4 private variants of acme/base-1b evaluated (more than 3)" in html
    assert "suspected contamination: gsm8k 13-gram overlap 41%" in html
    forms = re.findall(
        r'<form method="post" action="/leaderboard/review/[A-Za-z0-9_-]{22}/" class="review-form">(.*?)</form>', html, re.S
    )
    assert len(forms) == 2 and all("csrfmiddlewaretoken" in f and "<textarea" in f for f in forms)
    assert html.index("acme/public") < html.index("other/model")  # oldest first


def test_a_decision_needs_a_comment(staff, flagged):
    url = f"/leaderboard/review/{flagged['entry'].public_id}/"
    response = staff.post(url, {"action": "approve", "comment": "   "})
    assert response.status_code == 400
    assert "A comment is required" in response.content.decode()
    assert (
        Submission.objects.get(pk=flagged["entry"].pk).review_state == "flagged"
        and not ReviewAction.objects.exists()
    )
    assert (
        staff.post(url, {"action": "flag", "comment": "x"}).status_code == 400
    )  # only approve / hide / reject


def test_forms_are_csrf_protected(flagged):
    client = Client(enforce_csrf_checks=True)
    client.force_login(bd.user("staff2@example.org", staff=True))
    response = client.post(
        f"/leaderboard/review/{flagged['entry'].public_id}/", {"action": "approve", "comment": "ok"}
    )
    assert response.status_code == 403 and not ReviewAction.objects.exists()


def test_approve_hide_reject_and_the_board(staff, flagged):
    entry, other = flagged["entry"], flagged["contaminated"]
    assert entry.pk not in board_ids(staff)  # waiting for review
    response = staff.post(
        f"/leaderboard/review/{entry.public_id}/", {"action": "approve", "comment": "variants disclosed"}
    )
    assert response.status_code == 302 and response["Location"] == "/leaderboard/review/"
    assert Submission.objects.get(pk=entry.pk).review_state == "approved"
    assert entry.pk in board_ids(Client())
    queue = staff.get("/leaderboard/review/").content.decode()
    assert (
        "acme/public: approve recorded." in queue and f'data-submission="{entry.public_id}"' not in queue
    )  # left the queue

    staff.post(f"/leaderboard/review/{other.public_id}/", {"action": "hide", "comment": "overlap confirmed"})
    assert Submission.objects.get(pk=other.pk).review_state == "hidden"
    assert other.pk not in board_ids(Client()) and other.pk in board_ids(Client(), "?show=hidden")
    hidden_page = Client().get(f"/leaderboard/submissions/{other.public_id}/")  # linked from the show=hidden board
    assert hidden_page.status_code == 200 and "overlap confirmed" in hidden_page.content.decode()

    staff.post(f"/leaderboard/review/{other.public_id}/", {"action": "reject", "comment": "copied weights"})
    assert other.pk not in board_ids(Client(), "?show=hidden")
    assert Client().get(f"/leaderboard/submissions/{other.public_id}/").status_code == 404
    log = list(ReviewAction.objects.filter(submission=other).order_by("pk").values_list("action", "comment"))
    assert log == [("hide", "overlap confirmed"), ("reject", "copied weights")]


def test_the_audit_log_is_on_the_models_page(staff, flagged):
    entry = flagged["entry"]
    staff.post(f"/leaderboard/review/{entry.public_id}/", {"action": "hide", "comment": "asked the owner"})
    staff.post(
        f"/leaderboard/review/{entry.public_id}/", {"action": "approve", "comment": "owner disclosed all variants"}
    )
    public = Client().get(f"/leaderboard/submissions/{entry.public_id}/").content.decode()
    assert "owner disclosed all variants" in public and "asked the owner" in public and "Approved" in public
    assert public.index("owner disclosed all variants") < public.index("asked the owner")  # newest first
    assert "staff@example.org" not in public  # who decided is for staff
    assert "staff@example.org" in staff.get(f"/leaderboard/submissions/{entry.public_id}/").content.decode()
    single = staff.get(f"/leaderboard/review/{entry.public_id}/").content.decode()
    assert "owner disclosed all variants" in single and "Approved" in single


def test_the_service_writes_state_and_audit_row_in_one_transaction(flagged, monkeypatch):
    admin = bd.user("staff3@example.org", staff=True)
    entry = flagged["entry"]
    with pytest.raises(ValidationError):
        submission_review(submission=entry, admin=flagged["owner"], action="approve", comment="x")
    with pytest.raises(ValidationError):
        submission_review(submission=entry, admin=admin, action="approve", comment="")

    def broken_save(self, *args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Submission, "save", broken_save)
    with pytest.raises(RuntimeError):
        submission_review(submission=entry, admin=admin, action="approve", comment="fine")
    monkeypatch.undo()
    assert not ReviewAction.objects.exists()  # the audit row was rolled back with the state change
    assert Submission.objects.get(pk=entry.pk).review_state == "flagged"


def test_django_admin_links_to_the_review_page(flagged):
    client = Client()
    client.force_login(
        bd.get_user_model().objects.create_superuser("root@example.org", "root@example.org", "pw-42-root")
    )
    html = client.get(f"/admin/leaderboard/submission/{flagged['entry'].pk}/change/").content.decode()
    assert f'href="/leaderboard/review/{flagged["entry"].public_id}/"' in html


def test_same_weights_from_another_owner_are_refused_not_queued(flagged):
    """Duplicate weights under another name never reach the board: submission_create refuses them
    (and the database's unique constraint backs it), so the queue has nothing to decide."""
    with pytest.raises(ValidationError, match="already submitted"):
        duplicate_check(bd.user("thief@example.org"), flagged["entry"].weight_sha256)
