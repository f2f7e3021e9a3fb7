"""The one review queue: flagged submissions, flagged voters and identity-revealing answers on one staff
page; decisions with a required comment in one audit log (who, when, why), shown in the queue and the
Django admin; hostile input (no comment, unknown action, non-staff, an item already decided) changes
nothing; a confirmed voter's votes leave the next snapshot and the arena board shows before and after."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from arena.models import Vote, VoterFlag
from arena.ratings.refit import snapshots_refit
from leaderboard.models import ReviewAction, Submission
from tests.arena.vote_data import T0, votes_create, votes_from_rows
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    user = get_user_model().objects.create_user("staff@example.org", "staff@example.org", "pw-staff-42", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def queue(db):
    """One flagged submission, two flagged voters (one with 30 votes for m1), two identity votes."""
    owner = bd.user("owner@example.org")
    entry = bd.entry(owner, "acme/contaminated", gsm8k=bd.pattern(20, 19), review="flagged")
    Submission.objects.filter(pk=entry.pk).update(review_reason="suspected contamination: gsm8k 13-gram overlap 41%")
    votes_create({"m0": 0.0, "m1": -0.5, "m2": 0.5}, 300, seed=2)
    fan_rows = [("m1", "m2" if k % 2 else "m0", "model_a", "fan-session", "fan-ip") for k in range(30)]
    votes_from_rows(fan_rows, start=bd_time())
    fan = VoterFlag.objects.create(kind="session", voter_hash="fan-session", votes=30, p_value=1e-9,
                                   statistics={"p_surprise": 1e-3, "p_random": 0.5, "p_favour": 1e-9, "favoured": "m1"})
    clicker = VoterFlag.objects.create(kind="ip", voter_hash="clicker-ip", votes=60, p_value=1e-4, statistics={})
    identity = votes_create({"m0": 0.0, "m1": 0.0}, 2, counted=False, with_turns=True, start=bd_time(2))
    return {"entry": entry, "fan": fan, "clicker": clicker, "identity": identity}


def bd_time(days: int = 1):
    return T0.replace(day=1 + days)


def test_one_queue_lists_all_three_kinds_for_staff_only(queue, staff, client):
    page = staff.get("/leaderboard/review/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "acme/contaminated" in html and "suspected contamination" in html
    assert "Flagged voters (2)" in html and "fan-session" in html and "favouring m1" in html
    assert "Identity-revealing answers (2)" in html and f"Vote #{queue['identity'][0].pk}" in html
    assert "No decisions yet." in html
    assert client.get("/leaderboard/review/").status_code == 302  # anonymous: to the login page
    outsider = Client()
    outsider.force_login(bd.user("voter@example.org"))
    assert outsider.get("/leaderboard/review/").status_code == 404
    flag = queue["fan"]
    response = outsider.post(f"/leaderboard/review/voters/{flag.pk}/", {"action": "confirm", "comment": "x"})
    assert response.status_code == 404
    assert Client().post(f"/leaderboard/review/votes/{queue['identity'][0].pk}/", {"action": "restore",
                                                                                    "comment": "x"}).status_code == 302
    flag.refresh_from_db()
    assert flag.status == "pending" and not ReviewAction.objects.exists()
    assert Vote.objects.filter(excluded_reason="identity_revealed").count() == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "confirm"}, "A comment is required"),
        ({"action": "confirm", "comment": "   "}, "A comment is required"),
        ({"action": "delete-everything", "comment": "why not"}, "Select a valid choice"),
        ({"comment": "no action"}, "action: This field is required"),
        ({"action": "confirm", "comment": "x" * 2001}, "at most 2000 characters"),
    ],
)
def test_bad_decisions_are_refused_and_change_nothing(queue, staff, data, message):
    flag = queue["fan"]
    response = staff.post(f"/leaderboard/review/voters/{flag.pk}/", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    vote_response = staff.post(f"/leaderboard/review/votes/{queue['identity'][0].pk}/", data)
    assert vote_response.status_code == 400
    flag.refresh_from_db()
    assert flag.status == "pending" and not ReviewAction.objects.exists()
    assert Vote.objects.filter(session_hash="fan-session", counted=True).count() == 30
    assert staff.post("/leaderboard/review/voters/999999/", {"action": "confirm", "comment": "x"}).status_code == 404
    assert staff.post("/leaderboard/review/votes/999999/", {"action": "restore", "comment": "x"}).status_code == 404
    assert staff.get(f"/leaderboard/review/voters/{flag.pk}/").status_code == 405


def test_decisions_are_logged_and_a_second_decision_is_a_conflict(queue, staff, django_capture_on_commit_callbacks):
    fan, clicker, identity = queue["fan"], queue["clicker"], queue["identity"]
    with django_capture_on_commit_callbacks(execute=False):
        response = staff.post(f"/leaderboard/review/voters/{fan.pk}/",
                              {"action": "confirm", "comment": "always votes m1, 30 of 30"})  # fmt: skip
    assert response.status_code == 302
    assert staff.post(f"/leaderboard/review/voters/{clicker.pk}/",
                      {"action": "dismiss", "comment": "a shared university address"}).status_code == 302  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False):
        assert staff.post(f"/leaderboard/review/votes/{identity[0].pk}/",
                          {"action": "restore", "comment": "the model named a city, not itself"}).status_code == 302
    assert staff.post(f"/leaderboard/review/votes/{identity[1].pk}/",
                      {"action": "exclude", "comment": "says I am m1"}).status_code == 302  # fmt: skip
    again = staff.post(f"/leaderboard/review/voters/{fan.pk}/", {"action": "dismiss", "comment": "changed my mind"})
    assert again.status_code == 409 and "already decided" in again.content.decode()
    again = staff.post(f"/leaderboard/review/votes/{identity[0].pk}/", {"action": "exclude", "comment": "hm"})
    assert again.status_code == 409 and "not waiting" in again.content.decode()
    fan.refresh_from_db()
    clicker.refresh_from_db()
    assert (fan.status, clicker.status) == ("confirmed", "dismissed")
    assert not Vote.objects.filter(session_hash="fan-session", counted=True).exists()
    assert Vote.objects.get(pk=identity[0].pk).counted is True
    assert Vote.objects.get(pk=identity[1].pk).excluded_reason == "identity_confirmed"
    log = ReviewAction.objects.order_by("id")
    assert [(e.kind, e.action) for e in log] == [
        ("voter", "confirm"), ("voter", "dismiss"), ("identity", "restore"), ("identity", "exclude")
    ]
    assert all(e.admin.username == "staff@example.org" and e.comment and e.created_at for e in log)
    html = staff.get("/leaderboard/review/").content.decode()
    assert "always votes m1, 30 of 30" in html and "the model named a city" in html
    assert "No flagged voters." in html and "No identity-revealing answers waiting." in html
    superuser = get_user_model().objects.create_superuser("root@example.org", "root@example.org", "pw-root-42")
    admin = Client()
    admin.force_login(superuser)
    listing = admin.get("/admin/leaderboard/reviewaction/?kind=voter").content.decode()
    assert "always votes m1, 30 of 30" in listing and "says I am m1" not in listing
    assert admin.get("/admin/arena/voterflag/").status_code == 200
    refused = admin.post("/admin/leaderboard/reviewaction/add/",
                         {"kind": "voter", "voter_flag": fan.pk, "action": "dismiss", "comment": "again"})
    assert refused.status_code == 200 and "already decided" in refused.content.decode()
    assert ReviewAction.objects.count() == 4


def test_submission_decisions_share_the_log(queue, staff):
    entry = queue["entry"]
    response = staff.post(f"/leaderboard/review/{entry.public_id}/", {"action": "hide", "comment": "13-gram overlap"})
    assert response.status_code == 302
    row = ReviewAction.objects.get()
    assert (row.kind, row.submission_id, row.action) == ("submission", entry.pk, "hide")
    assert "13-gram overlap" in staff.get("/leaderboard/review/").content.decode()


def test_the_board_shows_ratings_before_and_after_a_confirmed_voter(queue, staff, client):
    snapshots_refit(rounds=20)
    assert "Before and after" not in client.get("/leaderboard/arena/").content.decode()
    staff.post(f"/leaderboard/review/voters/{queue['fan'].pk}/", {"action": "confirm", "comment": "fan of m1"})
    snapshots_refit(rounds=20)
    html = client.get("/leaderboard/arena/").content.decode()
    assert "Before and after removing anomalous voters" in html
    assert "330 votes" in html and "300 votes" in html
    assert "30 votes of 1 voter an admin confirmed as anomalous" in html
