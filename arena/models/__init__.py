"""The arena's data, one module per room: Django finds every table here.

- :mod:`.catalogue`: the model catalogue (:class:`LanguageModel`);
- :mod:`.battles`: battles and their turns;
- :mod:`.votes`: votes (their style columns) and flagged voters;
- :mod:`.ratings`: rating snapshots, the live board, each model's rating history;
- :mod:`.categories`: prompt categories tagged by a model, and staff checks of the tags;
- :mod:`.publication`: battles held back from publication, and data releases.

Names of the models in a battle never leave the server before its vote: battles are addressed by a
random ``public_id`` and the voter only ever sees "Model A" and "Model B".
"""

from arena.models.battles import Battle, Turn  # noqa: F401
from arena.models.catalogue import LanguageModel  # noqa: F401
from arena.models.categories import PromptTag, TagReview, VoteCategorization  # noqa: F401
from arena.models.publication import BattleHold, DataRelease  # noqa: F401
from arena.models.ratings import LiveRating, PairCountBase, RatingPoint, RatingSnapshot  # noqa: F401
from arena.models.votes import STYLE_KEYS, StyleCount, Vote, VoterFlag  # noqa: F401
