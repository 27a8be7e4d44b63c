"""What chat APIs accept of a message list: tool calls and their results in a shape
every API takes (:func:`check_tool_structure`), the turn order strict APIs require
(:func:`turn_order_problems`), and, in a request, every call answered right after it
and no result without its call (:func:`tool_pairing_problems`)."""

from __future__ import annotations

from collections.abc import Sequence

from .exceptions import InvalidMessageError
from .messages import Message

__all__ = [
    "SYSTEM_ROLES",
    "check_tool_structure",
    "clashes",
    "system_block_end",
    "tool_pairing_problems",
    "turn_order_problems",
]


#: Roles that belong in the leading instruction block strict chat APIs want.
SYSTEM_ROLES = ("system", "developer")


def system_block_end(messages: Sequence[Message]) -> int:
    """Where the leading run of system (and developer) messages ends: where a note
    goes, since strict chat APIs (Anthropic, Gemini, many open-model templates) accept
    instructions only as one leading block."""
    k = 0
    while k < len(messages) and messages[k].role in SYSTEM_ROLES:
        k += 1
    return k


def clashes(before: str | None, after: str) -> bool:
    """The turn-order rule of strict chat APIs, for two neighbours: whether a message
    of role ``after`` may not follow one of role ``before`` (``None``: the request's
    start). At the start and after the system block, only more of that block or the
    user; once the conversation began, no system message, and never two user (or two
    assistant) turns side by side."""
    if before is None or before in SYSTEM_ROLES:
        return after not in SYSTEM_ROLES and after != "user"
    if after in SYSTEM_ROLES:
        return True
    return before == after and before in ("user", "assistant")


def turn_order_problems(messages: Sequence[Message]) -> list[str]:
    """What strict chat APIs (Anthropic, Gemini, most open-model chat templates) refuse
    in the order of ``messages`` (:func:`clashes`), in words (empty when nothing): a
    system message after the leading system block, no message after that block, a first
    message that is not the user's, or two user (or two assistant) messages side by
    side."""
    if system_block_end(messages) == len(messages):
        return ["no message after the system block (a request needs one from the user)"]
    problems: list[str] = []
    before: str | None = None
    for j, m in enumerate(messages):
        role = m.role
        if clashes(before, role):
            if role in SYSTEM_ROLES:
                problems.append(f"message {j} is a {role} message after the conversation began")
            elif before is None or before in SYSTEM_ROLES:
                problems.append(f"message {j} opens the conversation as {role!r}, not 'user'")
            else:
                problems.append(f"messages {j - 1} and {j} are both {role!r}: turns must alternate")
        before = role
    return problems


def tool_pairing_problems(messages: Sequence[Message]) -> list[str]:
    """What a request to a chat API may not hold of tool calls, in words (empty when
    nothing): a tool result that does not answer a call of the assistant message just
    before its block of results (an orphan, which OpenAI and Anthropic refuse), or a
    call with no result in that block. Only the last message may make calls still
    waiting for their results (an agent about to run its tools)."""
    problems: list[str] = []
    waiting: set[str] = set()  # calls of the last assistant message, not yet answered
    for i, m in enumerate(messages):
        if m.role == "tool":
            if m.tool_call_id in waiting:
                waiting.discard(m.tool_call_id)
            else:
                problems.append(
                    f"message {i} answers tool call {m.tool_call_id!r}, which the "
                    "assistant message before it does not make"
                )
            continue
        if waiting:
            problems.append(f"tool calls {sorted(waiting)} have no result before message {i}")
        waiting = {c.id for c in m.tool_calls} if m.role == "assistant" else set()
    return problems


def check_tool_structure(messages: Sequence[Message]) -> None:
    """Raise :class:`InvalidMessageError` (naming the message) for tool calls no chat
    API accepts: a call or result on the wrong role, an empty id, two calls with one id
    in a message, a result that comes before its call, or two results for one call.

    What real histories do is accepted: a result whose call is not in the history (a
    trimmed prefix), a call without a result (an agent cut off), and an id used again
    by a later call once the earlier call was answered (each result answers the
    nearest call before it with its id).
    """
    open_calls: dict[str, int] = {}  # call id -> the message that made it, unanswered
    answered: dict[str, int] = {}  # call id -> the message that answered its last call
    later = {c.id for m in messages for c in m.tool_calls}
    for i, m in enumerate(messages):
        if m.tool_calls and m.role != "assistant":
            raise InvalidMessageError(
                f"a {m.role!r} message has tool calls; only assistant messages call tools",
                index=i,
            )
        if m.tool_call_id is not None and m.role != "tool":
            raise InvalidMessageError(
                f"a {m.role!r} message answers a tool call; only 'tool' messages do", index=i
            )
        ids = [c.id for c in m.tool_calls]
        if any(not c for c in ids) or (m.role == "tool" and not m.tool_call_id):
            raise InvalidMessageError("a tool call id must be a non-empty string", index=i)
        if len(set(ids)) != len(ids):
            raise InvalidMessageError(
                "two tool calls of this message share an id; give each call its own", index=i
            )
        for call_id in ids:
            open_calls[call_id] = i
            answered.pop(call_id, None)
        if m.role == "tool" and m.tool_call_id is not None:
            _check_result(m.tool_call_id, i, open_calls, answered, later)


def _check_result(
    call_id: str,
    i: int,
    open_calls: dict[str, int],
    answered: dict[str, int],
    later: set[str],
) -> None:
    if call_id in open_calls:
        del open_calls[call_id]
        answered[call_id] = i
    elif call_id in answered:
        raise InvalidMessageError(
            f"a second result for tool call {call_id!r} (message {answered[call_id]} "
            "answered it already); merge the results into one message",
            index=i,
        )
    elif call_id in later:
        raise InvalidMessageError(
            f"the result for tool call {call_id!r} comes before the call; put it after "
            "the assistant message that makes the call",
            index=i,
        )
    # else an orphan: its call is not in the history (accepted, carried through)
