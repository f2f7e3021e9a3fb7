"""The owner hears back: one mail when a submission's evaluation finishes or fails, with a link to its
page, and no second one when the task is retried or redelivered (Django's locmem mail backend, the
real evaluate task on a checkpoint folder that is gone, a real refused SMTP connection)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from django.core import mail

from leaderboard.models import Submission
from leaderboard.submissions import lifecycle
from leaderboard.submissions.services import submission_requeue
from leaderboard.tasks import submission_evaluate, submission_notify
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager(settings, celery_eager):
    settings.PODIUM_SITE_URL = "https://podium.example.org/"


@pytest.fixture
def pending(tmp_path):
    owner = bd.user("owner@example.org")
    sub = bd.submission(owner, "acme/tiny-notify", status="PENDING")
    Submission.objects.filter(pk=sub.pk).update(storage_path=str(tmp_path / "gone"))
    return Submission.objects.get(pk=sub.pk)


def test_a_failed_evaluation_is_mailed_once_with_its_reason_and_link(eager, pending, client,
                                                                     django_capture_on_commit_callbacks):  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_evaluate(pending.pk) == "failed"
    pending.refresh_from_db()
    assert pending.status == "FAILED" and pending.owner_notified_at is not None
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["owner@example.org"] and message.subject == "Podium: acme/tiny-notify failed"
    assert pending.failure_reason in message.body
    link = f"https://podium.example.org/leaderboard/submissions/{pending.public_id}/"
    assert link in message.body
    client.force_login(pending.owner)
    assert client.get(urlsplit(link).path).status_code == 200

    with django_capture_on_commit_callbacks(execute=True):  # a redelivery, a retried mail task
        assert submission_evaluate(pending.pk) == "nothing to do"
        assert submission_notify(pending.pk) == "nothing to send"
    assert len(mail.outbox) == 1

    with django_capture_on_commit_callbacks(execute=True):  # an admin requeues it: a new outcome
        submission_requeue(pending)
    assert Submission.objects.get(pk=pending.pk).status == "FAILED"
    assert len(mail.outbox) == 2


def test_a_finished_evaluation_is_mailed_once(eager, pending, django_capture_on_commit_callbacks):
    assert lifecycle.submission_start(pending.pk) is not None
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.submission_finish(pending.pk, log_tail="done")
    assert [m.subject for m in mail.outbox] == ["Podium: acme/tiny-notify finished"]
    assert "has finished" in mail.outbox[0].body and pending.public_id in mail.outbox[0].body
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_evaluate(pending.pk) == "nothing to do"
    assert submission_notify(pending.pk) == "nothing to send"
    assert len(mail.outbox) == 1


def test_nothing_is_mailed_before_a_submission_settles_or_without_an_address(eager, pending):
    assert submission_notify(pending.pk) == "nothing to send"  # still PENDING
    assert submission_notify(10**9) == "nothing to send"  # gone
    type(pending.owner).objects.filter(pk=pending.owner_id).update(email="")
    Submission.objects.filter(pk=pending.pk).update(status="FINISHED")
    assert submission_notify(pending.pk) == "nothing to send"
    assert mail.outbox == []


def test_a_mail_server_that_refuses_leaves_the_mail_to_a_retry(pending, settings):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", closed_port, 5
    Submission.objects.filter(pk=pending.pk).update(status="FINISHED")
    with pytest.raises(OSError):
        submission_notify.run(pending.pk)  # the task body; Celery's autoretry catches this same error
    assert Submission.objects.get(pk=pending.pk).owner_notified_at is None
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert submission_notify.run(pending.pk) == "sent" and len(mail.outbox) == 1
