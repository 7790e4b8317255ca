"""Render a conversation to prompt text with a snapshot's Jinja chat template.

The template comes from the snapshot (`chat_template.jinja`, else the
`chat_template` key of `tokenizer_config.json`) and is rendered the way
transformers' `apply_chat_template` renders it: a sandboxed Jinja
environment with `trim_blocks` and `lstrip_blocks`, the `loopcontrols`
extension, a `raise_exception` helper, a `tojson` filter that does not
escape HTML, `strftime_now`, and the special tokens (`eos_token`, ...) as
variables. For Qwen2.5 this is ChatML:

    <|im_start|>system\\n{system}<|im_end|>\\n<|im_start|>user\\n{text}<|im_end|>\\n
    <|im_start|>assistant\\n            (the generation prompt)
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from nanocompile.checkpoint.jsonfile import JSONFileError, read_json

CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")


class ChatTemplateError(ValueError):
    """The chat template is missing, malformed, or rejected the conversation."""


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=16)
def _compile(template: str) -> jinja2.Template:
    """The compiled template; raises ``jinja2.TemplateSyntaxError``."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(template)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _failing_line(error: BaseException) -> int | None:
    """The template line being rendered when ``error`` was raised.

    Jinja rewrites a rendering traceback so the template's frames carry the
    template's own line numbers (``from_string`` names them ``<template>``);
    the innermost such frame is the failing line.
    """
    line = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _at(name: str, line: int | None) -> str:
    return name if line is None else f"{name}:{line}"


def _read_config(directory: Path) -> dict[str, Any]:
    file = directory / CONFIG_FILE
    if not os.path.lexists(file):
        return {}
    try:
        config = read_json(file)
    except JSONFileError as err:
        raise ChatTemplateError(f"{file}: {err}") from None
    if not isinstance(config, dict):
        raise ChatTemplateError(f"{file} must hold a JSON object")
    return config


def _template_from_config(config: Mapping[str, Any], where: Path) -> str | None:
    template = config.get("chat_template")
    if template is None or isinstance(template, str):
        return template
    if isinstance(template, list):  # [{"name": ..., "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"]
    raise ChatTemplateError(f"{where}: 'chat_template' is neither a string nor has a 'default'")


def load_chat_template(snapshot_dir: str | os.PathLike[str]) -> str:
    """The snapshot's chat template: `chat_template.jinja`, else tokenizer_config.json's."""
    return _load_template(snapshot_dir)[0]


def _load_template(snapshot_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """The snapshot's chat template and where it came from (for error messages)."""
    directory = Path(snapshot_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"snapshot directory not found: {directory}")
    jinja_file = directory / TEMPLATE_FILE
    if jinja_file.is_file():
        return jinja_file.read_text(encoding="utf-8"), str(jinja_file)
    template = _template_from_config(_read_config(directory), directory / CONFIG_FILE)
    if template is None:
        raise ChatTemplateError(
            f"snapshot {directory} has no chat template "
            f"(no {TEMPLATE_FILE}, no 'chat_template' in {CONFIG_FILE})"
        )
    return template, f"{directory / CONFIG_FILE}:chat_template"


def _special_tokens(snapshot_dir: str | os.PathLike[str] | None) -> dict[str, str]:
    """`bos_token` etc. from tokenizer_config.json, as transformers passes them."""
    if snapshot_dir is None:
        return {}
    config = _read_config(Path(snapshot_dir))
    tokens: dict[str, str] = {}
    for key in SPECIAL_TOKEN_KEYS:
        value = config.get(key)
        if isinstance(value, dict):  # {"content": "<s>", ...} in older configs
            value = value.get("content")
        if isinstance(value, str):
            tokens[key] = value
    return tokens


def _check_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise ChatTemplateError("cannot render an empty conversation: give at least one message")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {index} must be a dict, got {type(message).__name__}")
        if not isinstance(message.get("role"), str):
            raise ChatTemplateError(f"message {index} has no string 'role': {message!r}")


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool,
    template: str | None = None,
    snapshot_dir: str | os.PathLike[str] | None = None,
) -> str:
    """The prompt text for `messages` (dicts with `role` and `content`).

    `template` is used when given; otherwise the chat template of
    `snapshot_dir`. With `add_generation_prompt` the text ends with the
    opening of an assistant turn, ready for generation.

    A template is a program: whatever it raises while rendering (its own
    `raise_exception`, a `TypeError`, a `ZeroDivisionError`, the sandbox's
    `OverflowError` or `SecurityError`, a `RecursionError`) becomes one
    `ChatTemplateError` line naming the template's file and line.
    """
    _check_messages(messages)
    name = "<template>"
    if template is None:
        if snapshot_dir is None:
            raise ChatTemplateError("render_chat needs a template or a snapshot_dir")
        template, name = _load_template(snapshot_dir)
    try:
        compiled = _compile(template)
    except jinja2.TemplateSyntaxError as err:
        raise ChatTemplateError(
            f"{_at(name, err.lineno)}: chat template does not parse: {err.message}") from None
    variables = _special_tokens(snapshot_dir)
    try:
        return compiled.render(
            messages=[dict(m) for m in messages],
            tools=None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            **variables,
        )
    except jinja2.TemplateError as err:
        where = _at(name, _failing_line(err))
        raise ChatTemplateError(f"{where}: chat template failed: {_first_line(err)}") from err
    except Exception as err:  # any failure of the template's own code
        where = _at(name, _failing_line(err))
        raise ChatTemplateError(
            f"{where}: chat template failed: {type(err).__name__}: {_first_line(err)}") from err
