"""Ratings from pairwise votes: Bradley-Terry with intervals, online Elo, style and length control.

Pure numpy/scipy. Votes come in as :class:`Battles` (columnar) or :class:`PairCounts` (aggregated);
results come out as frozen dataclasses (:class:`RatingResult` and friends). See ``docs/ratings.md``.
"""

from evalcore.ratings.battles import (
    OUTCOME_NAMES,
    STYLE_FEATURES,
    Battles,
    battles_from_arrays,
    battles_from_records,
)
from evalcore.ratings.bootstrap import bootstrap_bradley_terry
from evalcore.ratings.bt import fit_bradley_terry
from evalcore.ratings.counts import TIES_POLICIES, PairCounts, aggregate, pair_counts_from_arrays
from evalcore.ratings.elo import elo_permutation_study, elo_ratings, online_elo
from evalcore.ratings.io import read_battles, read_pair_counts, write_battles_csv, write_pair_counts
from evalcore.ratings.lc import LengthControlledResult, length_controlled_win_rate
from evalcore.ratings.lc_annotations import (
    LCAnnotations,
    annotations_from_arrays,
    read_difficulty,
    read_lc_annotations,
)
from evalcore.ratings.markdown import count_tokens, markdown_style_counts, style_vector
from evalcore.ratings.matrices import WinMatrix, predicted_win_matrix, win_matrix
from evalcore.ratings.prompts import DuplicatePrompts, duplicate_prompt_mask, normalise_prompt, prompt_key
from evalcore.ratings.provisional import exact_interval, mark_provisional, provisional_mask
from evalcore.ratings.result import BASE_RATING, ELO_PER_LOGIT, RatingResult
from evalcore.ratings.simulate import simulate_battles
from evalcore.ratings.style import StyleControlledResult, fit_style_controlled, style_differences
from evalcore.ratings.voters import VoterTest, voters_test

__all__ = [
    "BASE_RATING",
    "Battles",
    "DuplicatePrompts",
    "ELO_PER_LOGIT",
    "LCAnnotations",
    "LengthControlledResult",
    "OUTCOME_NAMES",
    "PairCounts",
    "RatingResult",
    "STYLE_FEATURES",
    "StyleControlledResult",
    "TIES_POLICIES",
    "VoterTest",
    "WinMatrix",
    "aggregate",
    "annotations_from_arrays",
    "battles_from_arrays",
    "battles_from_records",
    "bootstrap_bradley_terry",
    "count_tokens",
    "duplicate_prompt_mask",
    "elo_permutation_study",
    "elo_ratings",
    "exact_interval",
    "fit_bradley_terry",
    "fit_style_controlled",
    "length_controlled_win_rate",
    "mark_provisional",
    "markdown_style_counts",
    "normalise_prompt",
    "online_elo",
    "pair_counts_from_arrays",
    "predicted_win_matrix",
    "provisional_mask",
    "prompt_key",
    "read_battles",
    "read_difficulty",
    "read_lc_annotations",
    "read_pair_counts",
    "simulate_battles",
    "style_differences",
    "style_vector",
    "voters_test",
    "win_matrix",
    "write_battles_csv",
    "write_pair_counts",
]
