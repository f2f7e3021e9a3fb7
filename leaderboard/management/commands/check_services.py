"""``manage.py check_services``: one line per service; exit 1 naming what does not answer."""

from django.core.management.base import BaseCommand, CommandError

from common.health import broker_status, database_status

# Which environment variable to fix when a service does not answer.
VARIABLE_FOR = {"database": "DATABASE_URL", "broker": "CELERY_BROKER_URL (or REDIS_URL)"}


class Command(BaseCommand):
    help = "Check that the database and the Celery broker answer."

    def handle(self, *args, **options):
        checks = {"database": database_status(), "broker": broker_status()}
        failing = []
        for name, check in checks.items():
            if check["ok"]:
                detail = check.get("vendor") or check.get("url", "")
                self.stdout.write(f"{name}: ok ({detail})")
            else:
                failing.append(f"{name} is not answering: check {VARIABLE_FOR[name]} ({check['error']})")
        if failing:
            raise CommandError("; ".join(failing))
