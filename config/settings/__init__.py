"""Settings split: ``base`` (shared), ``dev`` (the default), ``test``, ``prod``.

``base`` gathers one module per theme: ``core``, ``web``, ``processes``, ``api``, ``arena``, ``leaderboard``
and ``observability``; the environments start from ``base`` and override.
"""
