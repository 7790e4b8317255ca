"""ChatML rendering: the snapshot's template, our Jinja rendering, transformers'.

Expected prompts are written out by hand from spec §1.3, not produced by the
code under test; the oracle checks transformers renders the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _tokenizer_fixture import qwen_tokenizer_dir

from nanocompile.tokenizer import ChatTemplateError, Tokenizer, load_chat_template, render_chat
from nanocompile.tokenizer.build import CHAT_TEMPLATE

DEFAULT_SYSTEM = (
    "<|im_start|>system\n"
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
)

CONVERSATIONS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ],
    [
        {"role": "system", "content": "You translate to French."},
        {"role": "user", "content": "cheese"},
        {"role": "assistant", "content": "fromage"},
        {"role": "user", "content": "bread"},
        {"role": "assistant", "content": "pain"},
    ],
    [{"role": "user", "content": "中文问题：北京在哪里？ 👋🏽 naïve café"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
    [{"role": "user", "content": "line one\nline two\r\n\ttabbed  {{ not jinja }} {% raw %}"}],
    [{"role": "assistant", "content": "I start the conversation."}],
    [
        {"role": "user", "content": "first"},
        {"role": "system", "content": "a later system message is an ordinary turn"},
    ],
    [{"role": "user", "content": "  leading and trailing spaces  "}],
    [
        {"role": "user", "content": "quotes ' \" and \\ backslash"},
        {"role": "tool", "content": "{}"},
    ],
    [{"role": "system", "content": "Ω≈ç√∫"}, {"role": "user", "content": "<|im_end|> in text"}],
]


@pytest.fixture(scope="session")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return qwen_tokenizer_dir(tmp_path_factory)


def test_default_system_message() -> None:
    messages = [{"role": "user", "content": "Hello!"}]
    assert render_chat(messages, add_generation_prompt=True, template=CHAT_TEMPLATE) == (
        DEFAULT_SYSTEM + "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"
    )


def test_given_system_message_replaces_default() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_chat(messages, add_generation_prompt=False, template=CHAT_TEMPLATE) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    )


def test_multi_turn() -> None:
    assert render_chat(CONVERSATIONS[2], add_generation_prompt=True, template=CHAT_TEMPLATE) == (
        DEFAULT_SYSTEM + "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
        "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_content_is_not_template_code() -> None:
    text = render_chat(CONVERSATIONS[6], add_generation_prompt=False, template=CHAT_TEMPLATE)
    assert text.endswith("line one\nline two\r\n\ttabbed  {{ not jinja }} {% raw %}<|im_end|>\n")


def test_snapshot_template_is_used(snapshot_dir: Path) -> None:
    assert load_chat_template(snapshot_dir) == CHAT_TEMPLATE
    for messages in CONVERSATIONS:
        for prompt in (False, True):
            assert render_chat(
                messages, add_generation_prompt=prompt, snapshot_dir=snapshot_dir
            ) == render_chat(messages, add_generation_prompt=prompt, template=CHAT_TEMPLATE)


def test_rendered_prompt_tokens(snapshot_dir: Path) -> None:
    tok = Tokenizer.from_dir(snapshot_dir)
    text = render_chat(CONVERSATIONS[0], add_generation_prompt=True, snapshot_dir=snapshot_dir)
    ids = tok.encode(text)
    im_start, im_end = tok.id_of("<|im_start|>"), tok.id_of("<|im_end|>")
    assert ids[0] == im_start
    assert ids.count(im_start) == 3
    assert ids.count(im_end) == 2
    assert ids[-3:] == [im_start, *tok.encode("assistant\n")]


def _snapshot_with(directory: Path, config: dict[str, object]) -> Path:
    directory.mkdir()
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


def test_chat_template_jinja_file_wins(tmp_path: Path) -> None:
    snapshot = _snapshot_with(tmp_path / "s", {"chat_template": "from config"})
    (snapshot / "chat_template.jinja").write_text("from file", encoding="utf-8")
    assert load_chat_template(snapshot) == "from file"


def test_named_template_list(tmp_path: Path) -> None:
    templates = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]
    snapshot = _snapshot_with(tmp_path / "s", {"chat_template": templates})
    assert (
        render_chat([{"role": "user"}], add_generation_prompt=False, snapshot_dir=snapshot) == "D"
    )


def test_special_tokens_are_template_variables(tmp_path: Path) -> None:
    snapshot = _snapshot_with(
        tmp_path / "s",
        {"chat_template": "{{ bos_token }}|{{ eos_token }}", "bos_token": None, "eos_token": "E"},
    )
    assert render_chat([{"role": "user"}], add_generation_prompt=False, snapshot_dir=snapshot) == (
        "|E"
    )


def test_missing_template_is_a_clear_error(tmp_path: Path) -> None:
    snapshot = _snapshot_with(tmp_path / "s", {"eos_token": "<|im_end|>"})
    with pytest.raises(ChatTemplateError, match="has no chat template"):
        render_chat(
            [{"role": "user", "content": "x"}], add_generation_prompt=True, snapshot_dir=snapshot
        )
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(ChatTemplateError, match="has no chat template"):
        load_chat_template(bare)
    with pytest.raises(FileNotFoundError, match="snapshot directory not found"):
        load_chat_template(tmp_path / "missing")
    with pytest.raises(ChatTemplateError, match="needs a template or a snapshot_dir"):
        render_chat([{"role": "user", "content": "x"}], add_generation_prompt=True)


def test_bad_config_json(tmp_path: Path) -> None:
    snapshot = tmp_path / "s"
    snapshot.mkdir()
    (snapshot / "tokenizer_config.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(ChatTemplateError, match="not valid JSON"):
        load_chat_template(snapshot)


@pytest.mark.parametrize(
    ("messages", "error", "message"),
    [
        ([], ChatTemplateError, "empty conversation"),
        ("hello", TypeError, "must be a list of dicts"),
        (["hello"], TypeError, "message 0 must be a dict"),
        ([{"content": "no role"}], ChatTemplateError, "no string 'role'"),
        ([{"role": "user", "content": ["a", "list"]}], ChatTemplateError, "string content"),
        ([{"role": "user"}], ChatTemplateError, "string content"),
    ],
)
def test_bad_messages(messages, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        render_chat(messages, add_generation_prompt=True, template=CHAT_TEMPLATE)


def test_template_errors_are_reported() -> None:
    user = [{"role": "user", "content": "x"}]
    with pytest.raises(ChatTemplateError, match="does not parse"):
        render_chat(user, add_generation_prompt=True, template="{% if %}")
    with pytest.raises(ChatTemplateError, match="custom failure"):
        render_chat(
            user, add_generation_prompt=True, template="{{ raise_exception('custom failure') }}"
        )


RUNTIME_FAILURES = [
    ("{{ 1 // 0 }}", "ZeroDivisionError"),
    ("{{ messages[0].role + 1 }}", "TypeError"),
    ("{{ range(10 ** 9) | list }}", "OverflowError"),  # the sandbox's MAX_RANGE
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
    ("{{ '%q' % 1 }}", "ValueError"),
]


@pytest.mark.parametrize(("body", "error"), RUNTIME_FAILURES)
def test_template_failing_at_run_time_names_its_file(tmp_path: Path, body: str,
                                                     error: str) -> None:
    """Any exception a template raises while rendering is one ChatTemplateError
    line naming the template's file and line (issue 14, point 5)."""
    user = [{"role": "user", "content": "x"}]
    snapshot = _snapshot_with(tmp_path / "s", {"eos_token": "<|im_end|>"})
    jinja_file = snapshot / "chat_template.jinja"
    jinja_file.write_text("{# a comment #}\n" + body, encoding="utf-8")
    with pytest.raises(ChatTemplateError) as info:
        render_chat(user, add_generation_prompt=True, snapshot_dir=snapshot)
    message = str(info.value)
    assert message.startswith(f"{jinja_file}:2: chat template failed: {error}: "), message
    assert "\n" not in message
    in_config = _snapshot_with(tmp_path / "c", {"chat_template": body})
    with pytest.raises(ChatTemplateError, match=f"tokenizer_config.json.*{error}"):
        render_chat(user, add_generation_prompt=True, snapshot_dir=in_config)
    with pytest.raises(ChatTemplateError, match=f"<template>:1: chat template failed: {error}"):
        render_chat(user, add_generation_prompt=True, template=body)


def test_template_that_does_not_parse_names_its_file(tmp_path: Path) -> None:
    snapshot = _snapshot_with(tmp_path / "s", {})
    (snapshot / "chat_template.jinja").write_text("ok\n{% if %}", encoding="utf-8")
    with pytest.raises(ChatTemplateError, match=r"chat_template.jinja:2: chat template "
                       r"does not parse"):
        render_chat([{"role": "user"}], add_generation_prompt=True, snapshot_dir=snapshot)


def test_template_is_sandboxed() -> None:
    user = [{"role": "user", "content": "x"}]
    with pytest.raises(ChatTemplateError, match="chat template failed"):
        render_chat(
            user,
            add_generation_prompt=True,
            template="{{ ''.__class__.__mro__[1].__subclasses__() }}",
        )
    with pytest.raises(ChatTemplateError, match="chat template failed"):
        render_chat(user, add_generation_prompt=True, template="{{ messages.append(1) }}")


def test_transformers_style_helpers() -> None:
    user = [{"role": "user", "content": "<b>ü</b>"}]
    template = (
        "{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{% endfor %}"
        "{{ messages[0] | tojson }}"
    )
    assert render_chat(user, add_generation_prompt=False, template=template) == (
        '{"role": "user", "content": "<b>ü</b>"}'
    )


@pytest.mark.oracle
def test_transformers_renders_the_same(snapshot_dir: Path) -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(snapshot_dir)
    tok = Tokenizer.from_dir(snapshot_dir)
    for messages in CONVERSATIONS:
        for prompt in (False, True):
            ours = render_chat(messages, add_generation_prompt=prompt, snapshot_dir=snapshot_dir)
            theirs = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
            assert ours == theirs, messages
            ids = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=prompt)
            if not isinstance(ids, list):  # transformers 5 returns a BatchEncoding
                ids = ids["input_ids"]
            assert tok.encode(ours) == ids
