"""Settings shared by every environment.

Everything a deployment changes comes from the environment (see ``config.env``). With no
environment at all Podium runs on one machine: SQLite in ``var/``, a Channels layer on a SQLite
file in ``var/`` (shared by the web and worker processes), and Celery over kombu's filesystem
transport in ``var/broker`` with results in the database (docs/operations.md explains the choice).

The settings live in one module per theme, gathered here: :mod:`~config.settings.core` (folders,
debug, secret key, hosts, database), :mod:`~config.settings.web` (Django's apps, middleware, login
throttling, templates, static and media files, mail), :mod:`~config.settings.processes` (Channels,
Celery and its beat schedule, caches), :mod:`~config.settings.api`, :mod:`~config.settings.arena`,
:mod:`~config.settings.leaderboard` and :mod:`~config.settings.observability`. A module imports by
name what it uses of another (core's folders, web's MEDIA_ROOT), so the order below changes no value.
``dev``, ``test`` and ``prod`` start from this module.
"""

from config.settings.api import *  # noqa: F403
from config.settings.arena import *  # noqa: F403
from config.settings.core import *  # noqa: F403
from config.settings.leaderboard import *  # noqa: F403
from config.settings.observability import *  # noqa: F403
from config.settings.processes import *  # noqa: F403
from config.settings.web import *  # noqa: F403
