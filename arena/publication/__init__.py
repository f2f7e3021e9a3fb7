"""Publication: what the arena shows the world, and when: consent, redaction, holds, releases, public battles.

Voters agree to the terms first (:mod:`.consent`); a voted battle is published after a delay unless
held (:mod:`.moderation` tags prompts, :mod:`.holds` keeps voters' reports and staff decisions); every
public text goes through :mod:`.redaction`; :mod:`.api` serves the public battles and
:mod:`.releases` writes the versioned data releases.
"""
