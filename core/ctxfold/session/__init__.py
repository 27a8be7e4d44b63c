"""Sessions: one growing conversation compressed turn after turn, in time proportional
to what is new, with a prefix a provider's prompt cache can keep (:class:`Session`).
:mod:`.log` is the session's append-only record in a store, :mod:`.fold` one
compaction, :mod:`.follow` a session that follows a message list kept elsewhere,
:mod:`.settings` how a session compacts (its settings, checked); :func:`migrate` copies
a session an older ctxfold stored into the current format, once."""

from .follow import Followed, Follower, frozen
from .log import migrate
from .session import Session
from .settings import CompactionOptions

__all__ = ["CompactionOptions", "Followed", "Follower", "Session", "frozen", "migrate"]
