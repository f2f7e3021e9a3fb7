"""Re-running an arena model's endpoint evaluation from the admin (issue 32, leftover 1).

A finished endpoint evaluation is re-run only after a confirmation page that names it; the re-run is a
new submission whose scores replace the old ones on the model's board row when it finishes (until then,
or if it fails, the old ones stay), and the old one stays recorded (its runs, protocols, pages and API
entry, marked ``superseded_by``). End to end against ``python -m evalcore serve`` with the real SmolLM2.

Hostile input: a double click on the confirmation, a stale or forged confirmation, a model whose endpoint
was removed, a non-staff user, an old failed attempt requeued over newer scores; the database keeps one
live and one current endpoint evaluation per model.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from arena.models import LanguageModel
from leaderboard.board import entries
from leaderboard.board.selectors import board_table
from leaderboard.models import EvaluationRun, Score, Submission
from leaderboard.submissions.endpoint import endpoint_evaluation_current, endpoint_evaluation_request
from leaderboard.submissions.lifecycle import submission_finish
from leaderboard.submissions.services import submission_requeue
from leaderboard.tasks import submission_evaluate  # noqa: F401 - known here, so an eager send runs it in place
from tests.conftest import free_port
from tests.evalcore.models.test_serve import MODEL_NAME, serve_process

pytestmark = pytest.mark.django_db
TASK = "mmlu_cloze_abstract_algebra"  # log-likelihood through /completions: quick on the real model
CHANGELIST = "/admin/arena/languagemodel/"


@pytest.fixture
def eager(settings, celery_eager, submissions_dir):
    settings.LEADERBOARD_SUITE_TASKS = [{"task": TASK, "num_fewshot": 0, "limit": 2}]


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(user)
    return user


def arena_model(name: str, base_url: str, **args) -> LanguageModel:
    return LanguageModel.objects.create(name=name, backend="openai", model_args={"base_url": base_url, **args},
                                        in_arena=True, licence="apache-2.0")  # fmt: skip


def finished_endpoint(model: LanguageModel, owner, **fields) -> Submission:
    """A finished endpoint evaluation of ``model`` as the worker leaves it (no runs: the rules only)."""
    return Submission.objects.create(
        owner=owner, model_name=model.name, language_model=model, model_type="chat", licence="mit",
        source="endpoint", precision="", endpoint={"backend": "openai-chat", "args": model.model_args},
        status="FINISHED", finished_at=timezone.now(), **fields,
    )  # fmt: skip


def post(client, url: str, data: dict, captured, *, execute: bool = True):
    """POST ``data``; (response, messages, on-commit callbacks left unrun when not ``execute``)."""
    with captured(execute=execute) as sent:
        response = client.post(url, data)
    return response, [str(m) for m in get_messages(response.wsgi_request)], sent


def select(model: LanguageModel, **extra) -> dict:
    return {"action": "evaluate", "_selected_action": [model.pk], **extra}


def board_row(model_name: str) -> dict:
    entries._KEPT.clear()
    rows = [r for r in board_table()["rows"] if r["model"] == model_name]
    assert len(rows) == 1, rows  # one row per model, whatever was re-run
    return rows[0]


def test_a_rerun_replaces_the_board_scores_when_it_finishes_and_keeps_the_old_run(
        client, staff, eager, settings, smollm2_dir, django_capture_on_commit_callbacks):  # fmt: skip
    host, port = serve_process(str(smollm2_dir))
    model = arena_model("smol-rerun", f"http://{host}:{port}/v1", model=MODEL_NAME, timeout=120)
    captured = django_capture_on_commit_callbacks
    response, said, _ = post(client, CHANGELIST, select(model), captured)
    first = Submission.objects.get(language_model=model)
    assert response.status_code == 302 and first.status == "FINISHED", (said, first.failure_reason, first.log_tail)
    old_run = EvaluationRun.objects.get(submission=first, task=TASK)
    assert board_row("smol-rerun")["public_id"] == first.public_id
    assert Score.objects.get(run=old_run, metric="acc").n == 2

    # Evaluated already: the action asks first, naming the evaluation a re-run replaces; nothing is queued.
    response, said, sent = post(client, CHANGELIST, select(model), captured)
    page = response.content.decode()
    assert response.status_code == 200 and "Re-run the evaluation?" in page, said
    assert f">#{first.pk}</a>" in page and "stay on the model's board row until the re-run finishes" in page
    assert f'name="rerun_of" value="{first.pk}"' in page and "stays recorded" in page and not sent
    assert Submission.objects.filter(language_model=model).count() == 1
    # The change page's button asks the same, posting back to itself.
    button = client.post(f"{CHANGELIST}{model.pk}/evaluate/")
    assert button.status_code == 200 and f'action="{CHANGELIST}{model.pk}/evaluate/"' in button.content.decode()

    # The suite changed; confirmed. The re-run waits in the queue: the old scores stay on the board meanwhile.
    settings.LEADERBOARD_SUITE_TASKS = [{"task": TASK, "num_fewshot": 0, "limit": 3}]
    confirm = select(model, rerun="yes", rerun_of=first.pk)
    response, said, sent = post(client, CHANGELIST, confirm, captured, execute=False)
    second = Submission.objects.exclude(pk=first.pk).get(language_model=model)
    assert response.status_code == 302 and second.status == "PENDING" and len(sent) == 1
    assert any(f">#{second.pk}</a> queued" in m and f"replace those of #{first.pk}" in m for m in said), said
    assert board_row("smol-rerun")["public_id"] == first.public_id
    # A double click on the confirmation (the list's or the button's) adds nothing.
    _, again, more = post(client, CHANGELIST, confirm, captured, execute=False)
    assert any("already pending (nothing added)" in m for m in again) and not more, again
    button, again, more = post(client, f"{CHANGELIST}{model.pk}/evaluate/", {"rerun": "yes", "rerun_of": first.pk},
                               captured, execute=False)  # fmt: skip
    assert button.status_code == 302 and any("already pending" in m for m in again) and not more, again
    assert Submission.objects.filter(language_model=model).count() == 2

    with django_capture_on_commit_callbacks(execute=True):
        for callback in sent:  # the worker runs it now
            callback()
    second.refresh_from_db()
    first.refresh_from_db()
    assert second.status == "FINISHED", (second.failure_reason, second.log_tail)
    assert first.superseded_by == second and second.superseded_by is None
    assert endpoint_evaluation_current(model) == second
    row = board_row("smol-rerun")
    assert row["public_id"] == second.public_id and row["cells"]["mmlu_cloze"]["n"] == 3
    new_run = EvaluationRun.objects.get(submission=second, task=TASK)
    assert new_run.suite.version > old_run.suite.version and row["cells"]["mmlu_cloze"]["run_id"] == new_run.pk

    # The old run stays recorded: its scores, protocol page and API entry, marked as replaced.
    assert Score.objects.get(run=old_run, metric="acc").n == 2 and old_run.protocol["endpoint"]["backend"] == "openai-chat"
    assert client.get(f"/leaderboard/runs/{old_run.pk}/").status_code == 200
    shown = client.get(f"/leaderboard/submissions/{first.public_id}/").content.decode()
    assert "Re-run since" in shown and f"/leaderboard/submissions/{second.public_id}/" in shown
    listed = client.get("/api/submissions/").json()
    marks = {s["id"]: s["superseded_by"] for s in listed.get("results", listed)}
    assert marks == {first.public_id: second.public_id, second.public_id: None}

    # A confirmation overtaken by the re-run (it names the replaced evaluation) re-runs nothing.
    _, said, sent = post(client, CHANGELIST, confirm, captured, execute=False)
    assert any("already evaluated" in m for m in said) and not sent, said
    assert Submission.objects.filter(language_model=model).count() == 2


def test_a_failed_rerun_leaves_the_old_scores_and_is_resumed_by_the_next_confirmation(
        client, staff, eager, django_capture_on_commit_callbacks):  # fmt: skip
    model = arena_model("flaky", f"http://127.0.0.1:{free_port()}/v1", model="flaky", max_retries=0, backoff=0)
    stale = Submission.objects.create(  # an attempt that failed before the evaluation that finished
        owner=staff, model_name=model.name, language_model=model, model_type="chat", licence="mit", source="endpoint",
        precision="", endpoint={"backend": "openai-chat", "args": model.model_args}, status="FAILED",
        failure_reason="unreachable",
    )  # fmt: skip
    old = finished_endpoint(model, staff)
    confirm = select(model, rerun="yes", rerun_of=old.pk)
    _, said, _ = post(client, CHANGELIST, confirm, django_capture_on_commit_callbacks)
    rerun = Submission.objects.get(language_model=model, pk__gt=old.pk)  # a new one: the older failure not resumed
    assert rerun.status == "FAILED" and "cannot reach" in rerun.failure_reason, said
    old.refresh_from_db()
    assert old.superseded_by is None and endpoint_evaluation_current(model) == old
    # Confirmed again: the failed re-run is resumed (same submission), not a third one.
    _, said, _ = post(client, CHANGELIST, confirm, django_capture_on_commit_callbacks)
    rerun.refresh_from_db()
    assert rerun.attempts == 2 and Submission.objects.filter(language_model=model).count() == 3, said
    # Requeuing the attempt from before the finished evaluation would resume it over the newer scores.
    with pytest.raises(ValidationError, match="later evaluation of this model"):
        submission_requeue(stale)


def test_a_model_whose_endpoint_was_removed_is_refused_without_asking(client, staff, eager,
                                                                     django_capture_on_commit_callbacks):  # fmt: skip
    model = arena_model("unplugged", "http://127.0.0.1:9/v1")
    old = finished_endpoint(model, staff)
    model.model_args = {"model": "unplugged"}  # its base_url removed
    model.save()
    for url, data in ((CHANGELIST, select(model)), (f"{CHANGELIST}{model.pk}/evaluate/", {}),
                      (CHANGELIST, select(model, rerun="yes", rerun_of=old.pk))):  # fmt: skip
        response, said, sent = post(client, url, data, django_capture_on_commit_callbacks)
        assert response.status_code == 302 and not sent, url
        assert any("has no endpoint: its model_args need base_url" in m for m in said), said
    assert list(Submission.objects.filter(language_model=model)) == [old] and endpoint_evaluation_current(model) == old


@pytest.mark.parametrize("rerun_of", ["", "abc", "-1", "9" * 40, "other"])
def test_forged_confirmations_rerun_nothing(client, staff, eager, rerun_of, django_capture_on_commit_callbacks):
    model = arena_model("forged", "http://127.0.0.1:9/v1")
    other = arena_model("other-model", "http://127.0.0.1:9/v1")
    old = finished_endpoint(model, staff)
    forged = str(finished_endpoint(other, staff).pk) if rerun_of == "other" else rerun_of
    response, said, sent = post(client, CHANGELIST, select(model, rerun="yes", rerun_of=forged),
                                django_capture_on_commit_callbacks)  # fmt: skip
    assert response.status_code == 302 and not sent and any("already evaluated" in m for m in said), said
    assert list(Submission.objects.filter(language_model=model)) == [old]


def test_only_staff_may_rerun(client, eager, django_capture_on_commit_callbacks):
    model = arena_model("guarded", "http://127.0.0.1:9/v1")
    admin = get_user_model().objects.create_superuser("a@example.org", "a@example.org", "pw-admin-42")
    old = finished_endpoint(model, admin)
    voter = get_user_model().objects.create_user("v@example.org", "v@example.org", "pw-voter-42")
    client.force_login(voter)
    for url, data in ((CHANGELIST, select(model, rerun="yes", rerun_of=old.pk)),
                      (f"{CHANGELIST}{model.pk}/evaluate/", {"rerun": "yes", "rerun_of": old.pk})):  # fmt: skip
        response, _, sent = post(client, url, data, django_capture_on_commit_callbacks)
        assert response.status_code == 302 and "/admin/login/" in response["Location"] and not sent
    with pytest.raises(PermissionDenied):
        endpoint_evaluation_request(model=model, requested_by=voter, rerun_of=old.pk)
    assert list(Submission.objects.filter(language_model=model)) == [old]


def test_constraints_keep_one_live_and_one_current_endpoint_evaluation(staff):
    model = arena_model("c", "http://127.0.0.1:9/v1")
    old = finished_endpoint(model, staff)
    with pytest.raises(IntegrityError), transaction.atomic():  # two current ones
        finished_endpoint(model, staff)
    live = Submission.objects.create(owner=staff, model_name="c", language_model=model, model_type="chat",
                                     licence="mit", source="endpoint", precision="", endpoint=old.endpoint)  # fmt: skip
    with pytest.raises(IntegrityError), transaction.atomic():  # two live ones
        Submission.objects.create(owner=staff, model_name="c", language_model=model, model_type="chat", licence="mit",
                                  source="endpoint", precision="", endpoint=old.endpoint, status="RUNNING")  # fmt: skip
    with pytest.raises(IntegrityError), transaction.atomic():  # only a finished endpoint run is superseded
        Submission.objects.filter(pk=live.pk).update(superseded_by=old)
    Submission.objects.filter(pk=live.pk).update(status="RUNNING")
    submission_finish(live.pk)  # the re-run finishes: the old one superseded in the same transaction
    old.refresh_from_db()
    assert old.superseded_by_id == live.pk and endpoint_evaluation_current(model).pk == live.pk
    submission_finish(live.pk)  # a duplicate finish supersedes nothing more
    live.refresh_from_db()
    assert live.superseded_by is None
