"""A chat conversation held within a context: the system message, the turns, and
which turns give way when the conversation outgrows the context.

The command line's ``chat`` keeps one :class:`Conversation`. Before each reply
it calls :meth:`Conversation.fit` with the room the reply needs: the oldest
exchanges (a user message and the replies after it) are dropped, oldest
first, until the rendered conversation leaves that room, but the newest user
message always stays. The system message is never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

ChatMessage = dict[str, str]
TokenCount = Callable[[list[ChatMessage]], int]
"""The prompt tokens of a rendered conversation (``Model.chat_ids``'s length)."""


@dataclass
class Conversation:
    """An optional system message and the user/assistant turns after it."""

    system: str | None = None
    turns: list[ChatMessage] = field(default_factory=list)

    def messages(self) -> list[ChatMessage]:
        """The messages to render: the system message (if set), then the turns."""
        head = [] if self.system is None else [{"role": "system", "content": self.system}]
        return head + list(self.turns)

    def add(self, role: str, content: str) -> None:
        """Append a turn (``role``: "user" or "assistant")."""
        if role not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {role!r}")
        self.turns.append({"role": role, "content": content})

    def drop_last_user_turn(self) -> None:
        """Take back the newest turn if it is a user message (its reply failed)."""
        if self.turns and self.turns[-1]["role"] == "user":
            self.turns.pop()

    def reset(self) -> None:
        """Forget every turn (the system message stays)."""
        self.turns.clear()

    def fit(self, count: TokenCount, limit: int) -> int:
        """Drop the oldest exchanges until ``count(messages()) <= limit`` or only the
        newest user message is left; returns how many turns were dropped."""
        dropped = 0
        while count(self.messages()) > limit:
            end = self._first_exchange_end()
            if end is None:
                break
            del self.turns[:end]
            dropped += end
        return dropped

    def _first_exchange_end(self) -> int | None:
        """Where the oldest exchange ends (the next user message), if a newer user
        message follows it."""
        for i in range(1, len(self.turns)):
            if self.turns[i]["role"] == "user":
                return i
        return None
