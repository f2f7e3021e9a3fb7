"""``manage.py recompute_intervals [--task TASK] [--dry-run]``: every stored run's intervals as the current
code computes them, from the per-sample records the run kept (no model is loaded, no answer re-scored).

See :mod:`leaderboard.evaluation.intervals_recompute` and docs/ratings.md "Interval coverage".
"""

from django.core.management.base import BaseCommand, CommandError

from leaderboard.evaluation.intervals_recompute import runs_recompute_intervals
from leaderboard.models import EvaluationRun


class Command(BaseCommand):
    help = "Recompute the intervals of finished runs from their stored per-sample records (values stay the same)."

    def add_arguments(self, parser):
        parser.add_argument("--task", default="", help="only this task's runs")
        parser.add_argument("--dry-run", action="store_true", help="count what would change, write nothing")

    def handle(self, *args, task: str, dry_run: bool, **options):
        task = task.strip()
        if task and not EvaluationRun.objects.filter(task=task).exists():
            raise CommandError(f"no run of task {task!r}; `manage.py shell -c` can list them: EvaluationRun.objects.values('task')")
        summary = runs_recompute_intervals(task=task, dry_run=dry_run)
        verb = "would change" if dry_run else "changed"
        self.stdout.write(
            f"{summary.runs} finished runs read: {summary.scores_changed} scores {verb} in {summary.runs_changed} runs"
        )
        for run_id, name, why in summary.skipped:
            self.stdout.write(f"run {run_id} ({name}) kept as it was: {why}")
