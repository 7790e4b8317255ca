"""Which turns give way when a chat outgrows its context (``inference.conversation``)."""

from __future__ import annotations

import pytest

from nanocompile.inference.conversation import ChatMessage, Conversation


def chars(messages: list[ChatMessage]) -> int:
    """A stand-in token count: the characters of the contents."""
    return sum(len(m["content"]) for m in messages)


def talk(*turns: str, system: str | None = "sys") -> Conversation:
    conversation = Conversation(system)
    for i, text in enumerate(turns):
        conversation.add("user" if i % 2 == 0 else "assistant", text)
    return conversation


def test_messages_put_the_system_message_first() -> None:
    assert talk("hi", "hello").messages() == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}]
    assert talk("hi", system=None).messages() == [{"role": "user", "content": "hi"}]


def test_fit_drops_the_oldest_exchanges_first() -> None:
    conversation = talk("aaaa", "bbbb", "cc", "dd", "e")  # 3 + 4 + 4 + 2 + 2 + 1 = 16
    assert conversation.fit(chars, 16) == 0
    assert conversation.fit(chars, 15) == 2  # the first exchange (user + reply) goes
    assert conversation.messages()[1:] == [{"role": "user", "content": "cc"},
                                           {"role": "assistant", "content": "dd"},
                                           {"role": "user", "content": "e"}]
    assert conversation.fit(chars, 4) == 2  # only the newest user message is left
    assert conversation.turns == [{"role": "user", "content": "e"}]
    assert conversation.system == "sys"  # never dropped


def test_fit_keeps_the_newest_user_message_even_if_too_long() -> None:
    conversation = talk("a", "b", "a very long message")
    assert conversation.fit(chars, 3) == 2
    assert conversation.turns == [{"role": "user", "content": "a very long message"}]


def test_reset_and_taking_back_a_turn() -> None:
    conversation = talk("hi", "hello", "again")
    conversation.drop_last_user_turn()
    assert [t["content"] for t in conversation.turns] == ["hi", "hello"]
    conversation.drop_last_user_turn()  # the newest is a reply: it stays
    assert len(conversation.turns) == 2
    conversation.reset()
    assert conversation.messages() == [{"role": "system", "content": "sys"}]


def test_roles_are_checked() -> None:
    with pytest.raises(ValueError, match="role must be 'user' or 'assistant', got 'system'"):
        Conversation().add("system", "x")
