"""The benchmark board: its table, charts, paired comparison, downloads and the REST API."""
