from django.apps import AppConfig


class ArenaConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "arena"
    verbose_name = "Arena"
