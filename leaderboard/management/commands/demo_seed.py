"""``manage.py demo_seed``: demo data for ``make demo``. Idempotent: safe to run again.

Creates (or resets) the ``admin`` superuser with a fresh random password, printed once.
"""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction


class Command(BaseCommand):
    help = "Load demo data: an admin user (password printed)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    @transaction.atomic
    def handle(self, *args, username, **options):
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
