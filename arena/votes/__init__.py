"""Votes: casting one, judging voters, and reading the counted votes back for fits and downloads.

:mod:`.casting` is the hot path (two database round trips on PostgreSQL); :mod:`.voters` flags anomalous
voters and records admins' decisions; :mod:`.filters` says what a refit leaves out. The refit's input is
read as numpy columns (:mod:`.selectors`, :mod:`.columns`, :mod:`.packing`, kept between refits by
:mod:`.cache`); the downloads are written in FastChat's battle format (:mod:`.exports`, :mod:`.csv_writer`).
"""
