"""A battle being played: its pages and WebSocket, starting it and its turns, the two answers' generation.

The voter's side of the arena up to the vote: the pair is sampled (:mod:`.sampling`), the battle and its
turns are stored and both answers queued (:mod:`.battles`, :mod:`.dispatch`), a worker records each side
as it streams (:mod:`.generation`, :mod:`.streams`), the page and the WebSocket read the battle back
(:mod:`.selectors`, :mod:`.consumers`, :mod:`.views`). Voters are known only by salted hashes
(:mod:`.identity`) and limited per window (:mod:`.ratelimit`); :mod:`.reveals` tells whether an answer
gives its model away. :mod:`.base` holds what every arena service shares (the refusal type, the two sides).
"""
