"""``manage.py uploads_expire``: remove the bytes of resumable uploads past their expiry now
(celery beat runs the same every hour: ``leaderboard.tasks.uploads_expire``)."""

from django.core.management.base import BaseCommand

from leaderboard.submissions import transfers


class Command(BaseCommand):
    help = "Remove resumable uploads nobody continued before they expired (LEADERBOARD_UPLOAD_EXPIRE_S)."

    def handle(self, *args, **options):
        self.stdout.write(f"{transfers.uploads_expire()} expired uploads removed")
