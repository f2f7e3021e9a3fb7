"""``manage.py podium_backup FILE``: the whole database to FILE (pg_dump custom format, or a SQLite copy)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from common.backup import BackupError, backup


class Command(BaseCommand):
    help = "Back up the database to a new file (PostgreSQL: pg_dump --format=custom)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options):
        try:
            done = backup(file)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"backed up {done['tables']} tables ({done['bytes']} bytes) to {done['file']}")
