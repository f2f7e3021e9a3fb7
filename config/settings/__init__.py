"""Settings split: ``base`` (shared), ``dev`` (the default), ``test``, ``prod``."""
