"""``manage.py demo_seed``: demo data for ``make demo``. Idempotent: safe to run again.

Creates (or resets) the ``admin`` superuser with a fresh random password, printed once, and, when a
shared model store is configured and holds SmolLM2-135M-Instruct, submits it to the leaderboard so
the worker evaluates it on the configured suite (``make demo`` sets a small slice). A model already
submitted is left alone; one whose evaluation failed is queued again.
"""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from leaderboard.models import Submission
from leaderboard.submissions import services
from leaderboard.submissions.forms import SubmissionForm

DEMO_MODEL = "SmolLM2-135M-Instruct"


class Command(BaseCommand):
    help = "Load demo data: an admin user (password printed) and SmolLM2 submitted to the leaderboard."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--no-submission", action="store_true", help="Skip the leaderboard submission.")

    def handle(self, *args, username, no_submission, **options):
        admin = self.admin_reset(username)
        if not no_submission:
            self.submit_demo_model(admin)

    @transaction.atomic
    def admin_reset(self, username):
        users = get_user_model()
        password = secrets.token_urlsafe(12)
        user, created = users.objects.get_or_create(
            username=username, defaults={"email": f"{username}@localhost", "is_staff": True, "is_superuser": True}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        verb = "created" if created else "reset"
        self.stdout.write(f"Admin user {verb}: username {username!r}, password {password!r}")
        return user

    def submit_demo_model(self, admin):
        if not settings.LEADERBOARD_MODEL_STORE:
            self.stdout.write("No LEADERBOARD_MODEL_STORE: the demo model is not submitted to the leaderboard.")
            return
        existing = Submission.objects.filter(model_name=DEMO_MODEL).order_by("-pk").first()
        if existing is not None:
            if existing.status == Submission.Status.FAILED:
                services.submission_requeue(existing)
                self.stdout.write(f"{DEMO_MODEL}: its last evaluation failed; queued again.")
            elif existing.status in (Submission.Status.PENDING, Submission.Status.RUNNING):
                # The demo was stopped mid-evaluation: send it again (a duplicate delivery is harmless).
                with transaction.atomic():
                    services.submission_enqueue(existing)
                self.stdout.write(f"{DEMO_MODEL}: evaluation was interrupted; queued again.")
            else:
                self.stdout.write(f"{DEMO_MODEL}: already on the leaderboard ({existing.status}).")
            return
        form = SubmissionForm(
            data={
                "model_name": DEMO_MODEL,
                "store_path": DEMO_MODEL,
                "precision": Submission.Precision.FLOAT32,
                "model_type": Submission.ModelType.CHAT,
                "base_model": "HuggingFaceTB/SmolLM2-135M",
                "licence": "apache-2.0",
                "open_weights": True,  # SmolLM2's weights are public on the Hugging Face Hub
            },
            staff=True,  # the demo's admin names a folder on the model store
        )
        if not form.is_valid():
            raise CommandError(f"the demo model could not be submitted: {form.errors.as_text()}")
        try:
            services.submission_create(
                owner=admin, data=form.cleaned_data, files=form.checkpoint_files, report=form.report,
                store_folder=form.store_folder,
            )  # fmt: skip
        except Exception as exc:
            raise CommandError(f"the demo model could not be submitted: {exc}") from None
        tasks = ", ".join(f"{t['task']} (first {t.get('limit', 'all')})" for t in settings.LEADERBOARD_SUITE_TASKS)
        self.stdout.write(f"{DEMO_MODEL} submitted to the leaderboard; the worker evaluates it on {tasks}.")
