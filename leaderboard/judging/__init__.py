"""Judges on the site: configs, judge runs on the ``judge`` queue, the judge column, pages and exports."""
