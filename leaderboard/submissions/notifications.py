"""Telling an owner that their submission's evaluation finished or failed: one mail per outcome.

Sent by the ``submission_notify`` task, which ``lifecycle`` enqueues when a submission settles (and
the evaluate task again when a redelivery finds it settled, in case the worker died in between).
``owner_notified_at`` is set in the same transaction as the mail goes out, under a row lock, so a
retried or duplicated task, or a redelivered evaluation that runs again, sends nothing more. An admin's
requeue of a failed submission clears the stamp: its next outcome gets its own mail.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from leaderboard.models import Submission

log = logging.getLogger(__name__)
SETTLED = (Submission.Status.FINISHED, Submission.Status.FAILED)


def submission_url(submission: Submission) -> str:
    """The submission's page as an absolute link (``PODIUM_SITE_URL``)."""
    return settings.PODIUM_SITE_URL.rstrip("/") + reverse("leaderboard:submission", args=[submission.public_id])


def submission_notify(submission_id: int) -> bool:
    """Mail the owner the outcome of a settled submission unless already done; True when a mail went.

    A failure to send (SMTP down) raises, rolls the stamp back and leaves the task to retry.
    """
    with transaction.atomic():
        submission = Submission.objects.select_for_update().select_related("owner").filter(pk=submission_id).first()
        if submission is None or submission.status not in SETTLED:
            return False
        if submission.owner_notified_at is not None:
            return False
        address = submission.owner.email
        if not address:
            log.info("submission %s settled; its owner has no e-mail address", submission_id)
            return False
        finished = submission.status == Submission.Status.FINISHED
        context = {"submission": submission, "finished": finished, "url": submission_url(submission)}
        subject = f"Podium: {submission.model_name} {'finished' if finished else 'failed'}"
        body = render_to_string("leaderboard/email/submission_settled.txt", context)
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address])
        submission.owner_notified_at = timezone.now()
        submission.save(update_fields=["owner_notified_at"])
    log.info("submission %s: owner mailed (%s)", submission_id, submission.status)
    return True
