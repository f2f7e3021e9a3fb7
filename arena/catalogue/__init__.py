"""The model catalogue: which models exist, what each is and how it is served, and their retirement.

The catalogue file is parsed and synced (:mod:`.sync`, its description keys in :mod:`.fields`), other
apps register models through :mod:`.services`, and :mod:`.selectors` and :mod:`.api` show the
public what each model is. The table is :class:`arena.models.LanguageModel`.
"""
