"""``manage.py contamination_scan SUBMISSION --corpus PATH [--n 13]``: scan a corpus for a submission.

An admin points the n-gram scan (``evalcore.contamination``) at a training corpus a model is known
or suspected to have seen: a ``.txt`` / ``.jsonl`` file (either gzipped) or a folder of them, at an
absolute path the workers can read. The scan runs on a worker (``default`` queue); its result shows
on the submission and protocol pages, and a share above ``LEADERBOARD_SCAN_FLAG_SHARE`` flags the
submission for review. Bad lines in the corpus are skipped and counted, never fatal.
"""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from leaderboard.evaluation.scans import corpus_check, scan_request
from leaderboard.models import ContaminationScan, Submission


class Command(BaseCommand):
    help = "Queue an n-gram scan of a training corpus for a submission's benchmark items."

    def add_arguments(self, parser):
        parser.add_argument(
            "submission", help="the submission's public id (or its number); put -- before an id that starts with -"
        )
        parser.add_argument("--corpus", required=True, help="absolute path of a corpus file or folder")
        parser.add_argument("--n", type=int, default=None, help="n-gram length, 8 to 13 (default: LEADERBOARD_SCAN_NGRAM)")
        parser.add_argument("--by", default="", help="the admin's username, recorded as who asked")

    def handle(self, *args, submission, corpus, n, by, **options):
        found = Submission.objects.filter(public_id=submission).first()
        if found is None and submission.isdigit() and len(submission) < 19:
            found = Submission.objects.filter(pk=int(submission)).first()
        if found is None:
            raise CommandError(f"no submission {submission[:100]!r}")
        if n is not None and not 8 <= n <= 13:
            raise CommandError(f"--n must be between 8 and 13, got {n}")
        admin = None
        if by:
            admin = get_user_model().objects.filter(username=by, is_staff=True).first()
            if admin is None:
                raise CommandError(f"no staff user {by[:100]!r}")
        try:
            path = corpus_check(corpus)
            with transaction.atomic():
                scan = scan_request(submission=found, corpus=path, kind=ContaminationScan.Kind.CORPUS,
                                    requested_by=admin, n=n)  # fmt: skip
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"scan {scan.pk} of {found.model_name} queued: {path}")
