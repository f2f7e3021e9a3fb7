"""Prompt categories: tagging voted prompts with the configured protocols, and the votes each category holds.

:mod:`.tagger` reads the configured tagger and protocols and names the categories, :mod:`.services`
tags votes and records staff checks, :mod:`.selectors` gives the refit its per-category masks, and
:mod:`.language` guesses a prompt's language.
"""
