"""``manage.py podium_restore FILE [--replace]``: load a podium_backup file into the configured database."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from common.backup import BackupError, restore


class Command(BaseCommand):
    help = "Restore a backup made by podium_backup into the configured (empty) database."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--replace", action="store_true", help="drop what the database holds first")

    def handle(self, *args, file: Path, replace: bool, **options):
        try:
            done = restore(file, replace=replace)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"restored {done['file']}: the database now has {done['tables']} tables")
