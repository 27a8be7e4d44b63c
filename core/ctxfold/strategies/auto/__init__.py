"""The ``auto`` strategy: the deterministic compression engine, as a pipeline of stages.

```
messages ─► analysis ─► plan ─► select ─► assemble ─► fit ─► (fill, LLM note)
            one message  this        value per   the output   exact count:
            alone,       conversation token,     and its      trim / top up /
            memoized     (scores,     greedy     note         fold a verbatim
                         copies, ids)                         unit, repeat
```

1. Pinned messages (system, developer), the task and a recency window of the newest
   whole units stay verbatim (:mod:`.fit`, the first step of the loop).
2. :mod:`.analysis`: older messages go through the encoding layers (dedup, truncation,
   JSON, whitespace) and the format adapters, which mark what to preserve and what is
   compressible; the result is memoized by content (a long earlier note's, line by line).
   Past the horizon (:mod:`.horizon`, older messages beyond a few budgets and 64,000
   tokens) a message is only glanced at: its identifiers and words counted, and a full
   analysis only for those its glance ranks best.
3. :mod:`.plan`: each segment is scored for this conversation; copies of later
   messages and the identifiers worth listing are found.
4. :mod:`.select`: one global selection keeps the sentences, lines, tool calls and
   identifiers worth the most per token across all older messages.
5. :mod:`.assemble`: a unit whose content is all chosen stays in place; the rest is
   condensed into one note that ends with the identifiers of folded content.
6. :mod:`.fit`: the exact count is checked and the selection trimmed (or topped up
   once) until the budget holds.

Every number these stages use is in :data:`.policy.POLICY`, with its reason.
"""

from .compressor import AutoCompressor
from .policy import POLICY, Policy, Verbatim

__all__ = ["POLICY", "AutoCompressor", "Policy", "Verbatim"]
