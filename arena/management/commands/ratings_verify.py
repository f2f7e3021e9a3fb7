"""``manage.py ratings_verify``: refit from the stored votes and compare with the stored snapshots."""

from django.core.management.base import BaseCommand, CommandError

from arena.ratings.verify import snapshots_verify


class Command(BaseCommand):
    help = "Refit the ratings from the stored votes and check they equal the latest stored snapshots."

    def add_arguments(self, parser):
        parser.add_argument("--tolerance", type=float, default=1e-6, help="largest allowed difference")

    def handle(self, *args, tolerance: float, **options):
        if not tolerance >= 0:
            raise CommandError("--tolerance must be a number >= 0")
        checked, problems = snapshots_verify(tolerance=tolerance)
        if problems:
            raise CommandError(f"{len(problems)} difference(s):\n" + "\n".join(problems[:50]))
        if not checked:
            self.stdout.write("no rating snapshots stored: nothing to verify")
            return
        self.stdout.write(f"{checked} snapshot(s) equal a refit from the stored votes")
