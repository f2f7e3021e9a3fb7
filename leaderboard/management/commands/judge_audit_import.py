"""``manage.py judge_audit_import CONFIG DIR``: store an audit made by ``python -m evalcore judge audit``.

Reads ``DIR/report.json`` and ``DIR/judgments.jsonl``, recomputes every figure from the judgments
(a report that does not match them is refused), and stores it as a finished audit of the judge config
named ``CONFIG``, shown on its page. Useful when the audit ran elsewhere (a GPU host, another judge
endpoint).
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.judging.services import judge_audit_import
from leaderboard.models import JudgeConfig


class Command(BaseCommand):
    help = "Store an audit report written by `python -m evalcore judge audit` for a judge config."

    def add_arguments(self, parser):
        parser.add_argument("config", help="the judge config's name")
        parser.add_argument("folder", help="the audit's --out folder (report.json, judgments.jsonl)")

    def handle(self, *args, config, folder, **options):
        found = JudgeConfig.objects.filter(name=config).first()
        if found is None:
            raise CommandError(f"no judge config named {config!r}")
        try:
            audit = judge_audit_import(found, Path(folder))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"audit {audit.pk} of {found.name} stored ({audit.report.get('pairs')} pairs)")
