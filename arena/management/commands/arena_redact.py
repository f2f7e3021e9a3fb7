"""``manage.py arena_redact``: store the redacted public texts of published battles (again).

Run it after upgrading the redactor (its version is in every stored redaction): turns redacted by
another version are redacted again. ``--all`` covers every voted battle, published or not yet.
"""

from django.core.management.base import BaseCommand

from arena.publication.redaction import published_redact
from evalcore.privacy.redact import REDACTOR_VERSION


class Command(BaseCommand):
    help = "Redact personal data and secrets in the texts of published battles (those not yet redacted by this version)."

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="every voted battle, not only the published ones")

    def handle(self, *args, **options):
        written = published_redact(everything=options["all"])
        self.stdout.write(f"{written} turn(s) redacted with {REDACTOR_VERSION}")
