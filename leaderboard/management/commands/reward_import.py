"""``manage.py reward_import NAME DIR``: store a reward model's run made by ``python -m evalcore reward``.

Reads ``DIR/report.json`` and ``DIR/rewards.jsonl``, recomputes every figure from the per-pair rewards
(a report that does not match them is refused) and stores it as ``NAME``'s result on those pairs files,
shown on /leaderboard/rewards/. Importing the same name on the same pairs again replaces it.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.rewards.services import reward_result_import


class Command(BaseCommand):
    help = "Store a reward model's result written by `python -m evalcore reward` (its --out folder)."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the reward model's name on the board")
        parser.add_argument("folder", help="the run's --out folder (report.json, rewards.jsonl)")

    def handle(self, *args, name, folder, **options):
        name = name.strip()
        if not name or len(name) > 100 or not name.isprintable():
            raise CommandError("the name must be 1 to 100 printable characters")
        try:
            result, created = reward_result_import(name, Path(folder))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        figure = result.report["overall"]
        accuracy = (
            "-"
            if figure["value"] is None
            else f"{figure['value']:.4f} [{figure['ci_low']:.4f}, {figure['ci_high']:.4f}]"
        )
        self.stdout.write(
            f"{'stored' if created else 'replaced'} {result.name}: accuracy {accuracy} on {figure['n']} pairs"
        )
