"""Ratings: refitting Bradley-Terry, Elo and style-controlled ratings from the counted votes, and reading them.

A committed vote asks for a refit (:mod:`.requests`); the live board keeps point ratings current vote by
vote (:mod:`.live`); a full refit reads the votes (:mod:`.inputs`), plans each category
(:mod:`.draft`), fits each method (:mod:`.fits`), holds the scale at its anchor (:mod:`.anchor`) and
stores snapshots and each model's history (:mod:`.refit`, :mod:`.history`). :mod:`.selectors` reads them
back; :mod:`.verify` checks stored snapshots against a refit.
"""
