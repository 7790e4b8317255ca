"""``nanocompile chat`` as a conversation (issue 21): a transcript on a real
pseudo-terminal (line editing, Ctrl-C at the prompt and mid-reply, the context
overflowing), and the same commands from a pipe.

The pty test types into a child process whose controlling terminal is the
pty, so Ctrl-C is the terminal's SIGINT as a user would send it. Its checks
read the closing line of each turn: "prefill N tokens" is compared with the
prompt the Python API renders for the messages the turn should have sent
(the edited line, the conversation after the oldest turns were dropped).
Every wait is bounded and fails loudly with the transcript; nothing asserts
a speed.

The KV cache is reused across turns (issue 19's prefix reuse): the closing
line's "(M cached)" (the prompt's tokens the engine did not run: its own count
of the tokens it ran through the cache) is compared with the longest common
prefix of the turn's prompt and the tokens the turn before ran (its prompt and
the reply tokens fed back), computed here from the API's own ids.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from nanocompile.api import Model, load
from nanocompile.cli import main
from nanocompile.inference.generate import GenerationResult

WAIT_SECONDS = 120
LEFT = "\x1b[D"


def interrupt_at_the_prompt(pty: Pty) -> None:
    """Ctrl-C at the prompt gives a fresh prompt. Python's readline turns SIGINT
    into KeyboardInterrupt when its wait for input is interrupted; a Ctrl-C that
    lands after the prompt is printed but before that wait begins (a loaded
    machine) stays pending until the next one, so press it again until the fresh
    prompt comes (signals coalesce: one KeyboardInterrupt, one prompt)."""
    for _ in range(10):
        pty.type("\x03")
        try:
            pty.expect(r"> ", seconds=5)
            return
        except AssertionError:
            if pty.proc.poll() is not None:
                raise
    raise AssertionError(f"no fresh prompt after Ctrl-C at the prompt:\n{pty.output}")


class Pty:
    """A child process on a pseudo-terminal: ``type`` keys, ``expect`` output."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))

        def controlling_terminal() -> None:  # in the child, after setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            # a test run started in the background of a non-interactive shell inherits
            # SIGINT ignored, and Python then installs no KeyboardInterrupt for it:
            # the terminal's Ctrl-C must reach the child as it would a user's shell's
            signal.signal(signal.SIGINT, signal.SIG_DFL)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     start_new_session=True,
                                     preexec_fn=controlling_terminal)
        os.close(slave)
        self.master = master
        self.output = ""
        self.seen = 0  # expect() looks after this point
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.1)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            with self._lock:
                self.output += data.decode("utf-8", "replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def expect(self, pattern: str, seconds: float = WAIT_SECONDS) -> re.Match[str]:
        deadline = time.monotonic() + seconds
        regex = re.compile(pattern)
        while True:
            with self._lock:
                found = regex.search(self.output, self.seen)
                if found:
                    self.seen = found.end()
                    return found
            if time.monotonic() > deadline or (self.proc.poll() is not None
                                               and not self._reader.is_alive()):
                raise AssertionError(f"no {pattern!r} in the transcript:\n{self.output}")
            time.sleep(0.02)

    def close(self) -> int:
        try:
            return self.proc.wait(WAIT_SECONDS)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._reader.join(5)
            os.close(self.master)


CLOSING = (r"(\d+) tokens? generated \(stop: ([a-z ]+)\) \| prefill (\d+) tokens?"
           r"(?: \((\d+) cached\))? in ")


def closing(pty: Pty) -> tuple[int, str, int]:
    """The next turn's closing line: tokens generated, stop reason, prompt tokens."""
    found = pty.expect(CLOSING)
    return int(found.group(1)), found.group(2), int(found.group(3))


def cached_of(line: re.Match[str]) -> int:
    """The prompt tokens a closing line says came from the cache (0: none)."""
    return int(line.group(4) or 0)


@pytest.fixture(scope="module")
def model(tiny_snapshot: Path) -> Model:
    return load(tiny_snapshot, backend="interpreter")


@pytest.mark.slow  # ~6 s: a child process compiling the tiny model, three long replies
def test_chat_transcript_on_a_terminal(tiny_snapshot: Path, model: Model,
                                       tmp_path: Path) -> None:
    max_tokens = 2000
    first_prompt = len(model.chat_ids([{"role": "user", "content": "world"}]))
    # the first turn fits exactly: any second turn makes the conversation overflow
    context = first_prompt + max_tokens
    inputrc = tmp_path / "inputrc"
    inputrc.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "NANOCOMPILE_TRACEBACK"}
    env.update(TERM="xterm", INPUTRC=str(inputrc))
    pty = Pty([sys.executable, "-m", "nanocompile.cli", "chat", "--model", str(tiny_snapshot),
               "--greedy", "--max-tokens", str(max_tokens), "--context", str(context)], env)
    try:
        pty.expect(r"Ctrl-C stops a reply, Ctrl-D ends")
        pty.expect(r"> ")
        interrupt_at_the_prompt(pty)  # a fresh prompt, the session goes on

        # line editing: "wrld", three steps left, "o": the model is sent "world"
        pty.type("wrld" + LEFT * 3 + "o\r")
        time.sleep(0.5)  # let the reply start
        pty.type("\x03")  # Ctrl-C mid-reply
        pty.expect(r"reply stopped \(Ctrl-C\); the conversation goes on")
        generated, stop, prompt = closing(pty)
        assert (stop, prompt) == ("cancelled", first_prompt)
        assert 0 < generated < max_tokens

        # the context overflows: the oldest exchange gives way, with a notice
        pty.expect(r"> ")
        pty.type("again\r")
        pty.expect(rf"the conversation outgrew the context \({context} tokens\): dropped the "
                   r"oldest 2 turns")
        time.sleep(0.3)
        pty.type("\x03")
        pty.expect(r"reply stopped \(Ctrl-C\)")
        generated, stop, prompt = closing(pty)
        assert (stop, prompt) == ("cancelled",
                                  len(model.chat_ids([{"role": "user", "content": "again"}])))

        pty.expect(r"> ")
        pty.type("/reset\r")
        pty.expect(r"conversation cleared")
        pty.expect(r"> ")
        pty.type("\x04")  # Ctrl-D: the end
        assert pty.close() == 0, pty.output
    finally:
        if pty.proc.poll() is None:
            pty.proc.send_signal(signal.SIGKILL)
    assert "Traceback" not in pty.output
    assert "interrupted" not in pty.output


# --------------------------------------------------------------------------
# the same commands from a pipe (in this process: the interpreter, a few tokens)


def chat(tiny_snapshot: Path, stdin: str, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[str, list[str]]:
    monkeypatch.delenv("NANOCOMPILE_TRACEBACK", raising=False)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    with pytest.raises(SystemExit) as info:
        main(["chat", "--model", str(tiny_snapshot), "--backend", "interpreter", "--greedy",
              *argv])
    out = capsys.readouterr()
    assert info.value.code == 0, out.err
    return out.out, out.err.splitlines()


@pytest.mark.slow  # ~3 s: a second model (context 40), three generations on the interpreter
def test_context_overflow_drops_old_turns(tiny_snapshot: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's command, ``printf 'hi\\nsecond line\\n' | nanocompile chat --context 60
    --max-tokens 30 --greedy``, exited with an error; here with fewer tokens (the
    first turn's 30-token prompt and its reply fill the context of 40)."""
    out, err = chat(tiny_snapshot, "hi\nsecond line\n", capsys, monkeypatch,
                    "--context", "40", "--max-tokens", "8")
    small = load(tiny_snapshot, backend="interpreter", context=40)
    assert len(small.chat_ids([{"role": "user", "content": "hi"}])) + 8 <= 40
    second = small.chat([{"role": "user", "content": "second line"}], max_tokens=8)
    assert out.endswith(f"\n{second.text}\n")
    assert ("nanocompile: the conversation outgrew the context (40 tokens): dropped the "
            "oldest 2 turns") in err
    assert f"prefill {second.prompt_tokens} tokens" in [e for e in err if "generated" in e][1]


def test_reset_and_system_commands(tiny_snapshot: Path, model: Model,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = chat(tiny_snapshot, "/system Be brief.\nhello\n/reset\nhello\n/system\nhi\n"
                    "/nope\n", capsys, monkeypatch, "--max-tokens", "4")
    brief = model.chat([{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "hello"}], max_tokens=4)
    # /system keeps the conversation, with the template's default system message now
    plain = model.chat([{"role": "user", "content": "hello"},
                        {"role": "assistant", "content": brief.text},
                        {"role": "user", "content": "hi"}], max_tokens=4)
    assert out == f"{brief.text}\n{brief.text}\n{plain.text}\n"  # /reset kept the system message
    assert "nanocompile: system message set" in err
    assert "nanocompile: conversation cleared (the system message stays)" in err
    assert "nanocompile: system message: the chat template's default" in err
    assert any(e.startswith("nanocompile: unknown command /nope (/reset: ") for e in err)
    prefills = [int(re.search(r"prefill (\d+) tokens", e).group(1))  # type: ignore[union-attr]
                for e in err if "generated" in e]
    assert prefills == [brief.prompt_tokens, brief.prompt_tokens, plain.prompt_tokens]


def fresh_reply(model: Model, messages: list[dict[str, str]]) -> GenerationResult:
    """The reply to ``messages`` with no prefix reuse (the reference turn)."""
    model.reuse_prefix = False
    try:
        return model.chat(messages, max_tokens=4)
    finally:
        model.reuse_prefix = True


def _expected_cached(model: Model, first: list[dict[str, str]], reply_ids: list[int],
                     second: list[dict[str, str]]) -> int:
    """What the second turn finds in the cache, computed here: the longest common
    prefix of its prompt and the first turn's prompt plus the reply tokens fed
    back (all but the last generated one), at most its prompt minus one."""
    ran = model.chat_ids(first) + reply_ids[:-1]
    prompt = model.chat_ids(second)
    n = 0
    while n < min(len(ran), len(prompt)) and ran[n] == prompt[n]:
        n += 1
    return min(n, len(prompt) - 1)


def test_the_second_turn_prefills_only_its_own_tokens(
        tiny_snapshot: Path, model: Model, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, err = chat(tiny_snapshot, "hello\nand more\n", capsys, monkeypatch, "--max-tokens", "4")
    lines = [m for line in err if (m := re.search(CLOSING, line))]
    assert len(lines) == 2, err
    first = [{"role": "user", "content": "hello"}]
    reply = fresh_reply(model, first)
    assert cached_of(lines[0]) == 0
    second = [*first, {"role": "assistant", "content": reply.text},
              {"role": "user", "content": "and more"}]
    want = _expected_cached(model, first, reply.token_ids, second)
    assert want >= len(model.chat_ids(first))  # the whole first prompt at least
    assert cached_of(lines[1]) == want
    assert int(lines[1].group(3)) == len(model.chat_ids(second))


@pytest.mark.slow  # ~5 s: a child process compiling the tiny model, two short replies
def test_cache_reuse_on_a_terminal(tiny_snapshot: Path, tmp_path: Path) -> None:
    """The transcript's cache reuse: the second turn prefills only its own tokens
    (its closing line's "cached" count is the common prefix computed here, from
    the reply of the same compiled model the child runs)."""
    model = load(tiny_snapshot)
    inputrc = tmp_path / "inputrc"
    inputrc.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "NANOCOMPILE_TRACEBACK"}
    env.update(TERM="xterm", INPUTRC=str(inputrc))
    pty = Pty([sys.executable, "-m", "nanocompile.cli", "chat", "--model", str(tiny_snapshot),
               "--greedy", "--max-tokens", "4"], env)
    try:
        pty.expect(r"Ctrl-C stops a reply, Ctrl-D ends")
        pty.expect(r"> ")
        pty.type("hello\r")
        first_line = pty.expect(CLOSING)
        pty.expect(r"> ")
        pty.type("and more\r")
        second_line = pty.expect(CLOSING)
        pty.expect(r"> ")
        pty.type("\x04")
        assert pty.close() == 0, pty.output
    finally:
        if pty.proc.poll() is None:
            pty.proc.send_signal(signal.SIGKILL)
    first = [{"role": "user", "content": "hello"}]
    reply = fresh_reply(model, first)
    second = [*first, {"role": "assistant", "content": reply.text},
              {"role": "user", "content": "and more"}]
    assert cached_of(first_line) == 0
    assert cached_of(second_line) == _expected_cached(model, first, reply.token_ids, second)
    assert int(second_line.group(3)) == len(model.chat_ids(second))
