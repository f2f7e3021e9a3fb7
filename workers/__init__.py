"""Celery app, queue routing and the worker runtime. Imports no Django app: the apps'
``tasks.py`` modules are found by Celery's autodiscovery."""

from workers.celery import app

__all__ = ["app"]
