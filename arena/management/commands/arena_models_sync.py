"""``manage.py arena_models_sync FILE``: declare the arena's models from a YAML file."""

from django.core.management.base import BaseCommand, CommandError

from arena.catalogue.sync import catalogue_parse, catalogue_sync


class Command(BaseCommand):
    help = "Validate a YAML file of arena models and sync it into the catalogue."

    def add_arguments(self, parser):
        parser.add_argument("file")

    def handle(self, *args, file, **options):
        try:
            report = catalogue_sync(catalogue_parse(file))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for label, names in (("created", report.created), ("updated", report.updated), ("retired", report.retired)):
            if names:
                self.stdout.write(f"{label}: {', '.join(names)}")
        if report.returned:  # a retirement made in the admin, cleared by this file: said, never silent
            self.stderr.write(self.style.WARNING(
                f"back in the arena (the file declares them without retired:): {'; '.join(report.returned)}"))
        self.stdout.write(f"{len(report.created) + len(report.updated)} arena models declared")
