"""The admin's action on the tagging queue: staff with the change permission put the selected failed
categorisations back in the queue (attempts and error cleared, a tagging run asked for after the commit);
rows not failed are left as they are; staff without the permission do not get the action."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from arena.categories import services as category_services
from arena.models import VoteCategorization
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

URL = "/admin/arena/votecategorization/"


@pytest.fixture
def queue():
    votes = votes_create({"alpha": 0.5, "beta": 0.0}, 4, seed=1)
    statuses = ["failed", "failed", "failed", "done"]
    return [
        VoteCategorization.objects.create(
            vote=v,
            prompt_sha256=f"{k:064x}",
            status=s,
            attempts=3 if s == "failed" else 1,
            error="tagger said nothing" if s == "failed" else "",
        )  # fmt: skip
        for k, (v, s) in enumerate(zip(votes, statuses))
    ]


@pytest.fixture
def scheduled(monkeypatch):
    calls = []
    monkeypatch.setattr(category_services, "categories_tag_schedule", lambda: calls.append(1) or True)
    return calls


def staff(*, can_change: bool):
    user = get_user_model().objects.create_user("staffer", "s@example.org", "pw-staff-123", is_staff=True)
    names = ["view_votecategorization"] + (["change_votecategorization"] if can_change else [])
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="arena", codename__in=names))
    return user


def test_the_action_retries_the_selected_failed_rows_only(
    client, queue, scheduled, django_capture_on_commit_callbacks
):
    client.force_login(staff(can_change=True))
    page = client.get(URL)
    assert page.status_code == 200 and "Retry the selected failed categorisations" in page.content.decode()
    chosen = [queue[0].pk, queue[1].pk, queue[3].pk]  # two failed, one done
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(URL, {"action": "retry_failed", "_selected_action": chosen}, follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    assert "2 failed categorisation(s) put back in the tagging queue (1 selected were not failed" in text
    rows = {r.pk: r for r in VoteCategorization.objects.all()}
    assert [(rows[r.pk].status, rows[r.pk].attempts, rows[r.pk].error) for r in queue] == [
        ("pending", 0, ""), ("pending", 0, ""), ("failed", 3, "tagger said nothing"), ("done", 1, ""),
    ]  # fmt: skip
    assert scheduled == [1]  # one tagging run asked for, after the commit


def test_nothing_to_retry_is_said_and_asks_for_no_run(
    client, queue, scheduled, django_capture_on_commit_callbacks
):
    client.force_login(staff(can_change=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            URL, {"action": "retry_failed", "_selected_action": [queue[3].pk]}, follow=True
        )
    assert "0 failed categorisation(s) put back" in response.content.decode()
    assert scheduled == [] and VoteCategorization.objects.filter(status="failed").count() == 3


def test_staff_without_the_change_permission_do_not_get_the_action(client, queue, scheduled):
    client.force_login(staff(can_change=False))
    page = client.get(URL)
    assert page.status_code == 200 and "retry_failed" not in page.content.decode()
    client.post(URL, {"action": "retry_failed", "_selected_action": [queue[0].pk]})
    assert VoteCategorization.objects.filter(status="failed").count() == 3
    assert client.get(f"{URL}add/").status_code == 403  # still read-only otherwise


def test_the_function_still_retries_every_failed_row(queue, scheduled, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert category_services.categorizations_retry() == 3
    assert not VoteCategorization.objects.filter(status="failed").exists() and scheduled == [1]


def test_the_lookback_is_a_setting_and_zero_takes_every_vote(settings):
    """A vote without a row whose id lies more than ARENA_CATEGORY_LATE_IDS below the newest enlisted
    vote is not looked at (the index range); a wider window, or 0 (no limit), enlists it."""
    settings.ARENA_CATEGORY_TAGGER = {"backend": "hf", "model_args": {"path": "/nowhere"}}
    votes = votes_create({"alpha": 0.5, "beta": 0.0}, 8, seed=2, with_turns=True)
    for vote in votes[1:]:  # the first vote "committed late": every later one is enlisted already
        VoteCategorization.objects.create(vote=vote, prompt_sha256="0" * 64)
    gap = votes[-1].pk - votes[0].pk
    settings.ARENA_CATEGORY_LATE_IDS = gap
    assert category_services.votes_enlist(limit=10) == 0
    settings.ARENA_CATEGORY_LATE_IDS = gap + 1
    assert category_services.votes_enlist(limit=10) == 1
    VoteCategorization.objects.filter(vote=votes[0]).delete()
    settings.ARENA_CATEGORY_LATE_IDS = 0
    assert category_services.votes_enlist(limit=10) == 1
    settings.ARENA_CATEGORY_LATE_IDS = -1
    with pytest.raises(category_services.ArenaError, match="ARENA_CATEGORY_LATE_IDS"):
        category_services.votes_enlist(limit=10)
