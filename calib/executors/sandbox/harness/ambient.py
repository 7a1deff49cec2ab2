"""Environment variables, stdin and command line of an input state (runs inside the sandbox; stdlib only).

An input state may carry ``env`` (name → text, or ``None`` for unset), ``stdin`` (text) and ``argv``
(the command line's arguments, ``sys.argv[1:]``: a list of texts). Before each input
:meth:`Ambient.reset` puts ``os.environ`` back to the sandbox's own environment (the one the batch
started with: bubblewrap's cleared environment, never the host's), file descriptor 0 and ``sys.stdin``
back to an empty stream and ``sys.argv`` back to ``[ARGV0]`` (a new list: what the code did to the last
one is gone); :meth:`Ambient.apply` then sets ``sys.argv`` to ``[ARGV0, *argv]``, the input's variables and feeds
its stdin through descriptor 0 (so ``input()``, ``sys.stdin``, ``sys.stdin.buffer``, ``fileinput`` and
``os.read(0, …)`` all see it). Nothing of one input reaches the next. What the code changed in
``os.environ`` (names set, changed or deleted) is part of its output state (:meth:`Ambient.changes`);
what it read of stdin is not. Both are bounded: a value past the bounds makes the input fail before the
call (reason ``call_failed``), as any malformed input does.
"""

from __future__ import annotations

import os
import sys

from . import canon

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    import random
    from typing import Any

    from . import inputs

MAX_ENV = 64  # variables per input
MAX_ENV_NAME = 256  # characters of a name
MAX_ENV_VALUE = 4096  # characters of a value
MAX_STDIN = 64 * 1024  # characters of stdin
MAX_ARGV = 64  # command-line arguments per input
MAX_PROBE_ARGS = 3  # arguments of a returned closure's first probe call (:func:`.returned.closure_params`)
MAX_ARG = 4096  # characters of one argument
ABSENT = "absent.txt"  # a file name on the command line that the search does not write
ARGV0 = "prog"  # sys.argv[0], the same for every input (argparse's usage line names it)


def check(env: Any, stdin: Any, argv: Any = None, probe: Any = None) -> str:
    """Why ``env``/``stdin``/``argv``/``probe`` of an input state are not well formed ('' when they are); the host
    runs the same check on every state a batch reports, and the harness on every state it is given. (``probe``:
    a returned closure's first arguments, :func:`.returned.closure_params`.)"""
    if env is not None:
        if not isinstance(env, dict) or len(env) > MAX_ENV:
            return f"env must be a mapping of at most {MAX_ENV} names"
        for name, value in env.items():
            if not isinstance(name, str) or not name or len(name) > MAX_ENV_NAME or "=" in name or "\0" in name:
                return f"env name {str(name)[:40]!r} is not a variable name (1-{MAX_ENV_NAME} characters, no '=')"
            if value is not None and (not isinstance(value, str) or len(value) > MAX_ENV_VALUE or "\0" in value):
                return f"env value of {name} must be text of at most {MAX_ENV_VALUE} characters, or null (unset)"
    if stdin is not None and (not isinstance(stdin, str) or len(stdin) > MAX_STDIN):
        return f"stdin must be text of at most {MAX_STDIN} characters"
    if argv is not None and not (isinstance(argv, list) and len(argv) <= MAX_ARGV and all(
            isinstance(a, str) and len(a) <= MAX_ARG and "\0" not in a for a in argv)):
        return f"argv must be a list of at most {MAX_ARGV} texts of at most {MAX_ARG} characters (sys.argv[1:])"
    if probe is not None and not (isinstance(probe, list) and len(probe) <= MAX_PROBE_ARGS
                                  and all(isinstance(v, str) for v in probe)):
        return f"probe must be a list of at most {MAX_PROBE_ARGS} values written as text"
    return ""


class Ambient:
    """The environment variables, stdin and command line the inputs of one batch run with."""

    def __init__(self, scratch: str) -> None:
        self.environ = os.environ  # the mapping itself: code that rebinds ``os.environ`` gets it back
        # the sandbox's environment as the batch started, and what os.environ holds once the current
        # input's variables are set (compared as the mapping's raw data: decoding it costs ~15 us an input)
        self.base = self.expected = dict(self._data())
        self.path = scratch  # stdin's content, outside the working directory (never an output)
        self.fd = self.rfd = -1  # stdin's file, written per input, and read-only: descriptor 0's copy
        self.stdin = sys.stdin  # reads descriptor 0, which holds /dev/null between inputs
        self.fed = False  # descriptor 0 holds an input's stdin

    def _data(self) -> dict[Any, Any]:
        data = getattr(self.environ, "_data", None)
        return data if isinstance(data, dict) else dict(self.environ)

    def reset(self) -> None:
        """Before each input: the sandbox's environment, an empty stdin."""
        os.environ = self.environ  # noqa: B003 - the mapping back in place; its content is reset below
        if self._data() != self.base:
            self.environ.clear()
            for key, value in self.base.items():  # the raw data: os.environ's own encoding, undone
                self.environ[self.environ.decodekey(key)] = self.environ.decodevalue(value)
        self.expected = self.base
        if self.fed:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            self.fed = False
        sys.stdin = self.stdin
        sys.argv = [ARGV0]

    def apply(self, state: dict[str, Any]) -> None:
        """Set the input's command line, variables and stdin (ValueError when they are malformed)."""
        env, text, argv = state.get("env"), state.get("stdin"), state.get("argv")
        problem = check(env, text, argv)
        if problem:
            raise ValueError(f"calib input state: {problem}")
        if argv is not None:
            sys.argv = [ARGV0, *argv]
        if env:
            for name, value in env.items():
                if value is None:
                    self.environ.pop(name, None)
                else:
                    self.environ[name] = value
            self.expected = dict(self._data())
        if text is not None:
            if self.fd < 0:  # a file with no name once open: the code cannot put another in its place
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                self.rfd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)  # stdin cannot write the next input's
                os.unlink(self.path)
            data = text.encode("utf-8", "surrogatepass")
            os.ftruncate(self.fd, 0)
            done = 0
            while done < len(data):
                done += os.pwrite(self.fd, data[done:], done)
            os.dup2(self.rfd, 0)
            os.lseek(0, 0, os.SEEK_SET)
            self.fed = True
            sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115

    def changes(self) -> dict[str, str | None]:
        """What the code set, changed (name → value) or deleted (name → None) in ``os.environ``."""
        data = self._data()
        if data == self.expected:
            return {}
        try:
            decode, value = self.environ.decodekey, self.environ.decodevalue
            out: dict[str, str | None] = {decode(k): value(v) for k, v in data.items() if self.expected.get(k) != v}
            out.update({decode(k): None for k in self.expected if k not in data})
        except Exception:  # noqa: BLE001 - the code replaced the mapping's data with something else
            return {"<unreadable>": None}
        return _bounded(out)


def _bounded(changed: dict[str, str | None]) -> dict[str, str | None]:
    """At most ``MAX_ENV`` names, each value cut at ``MAX_ENV_VALUE`` characters; what is cut is kept as
    its size and digest (two states that differ only there still differ), as captured output is."""
    names = sorted(changed)
    out: dict[str, str | None] = {}
    for name in names[:MAX_ENV]:
        value = changed[name]
        if value is not None and (len(value) > MAX_ENV_VALUE or len(name) > MAX_ENV_NAME):
            digest = canon.sha256(f"{name}={value}".encode("utf-8", "surrogatepass")).hexdigest()
            value = f"{value[:MAX_ENV_VALUE]}<... {len(value) - MAX_ENV_VALUE} more characters, sha256 {digest}>"
        out[name[:MAX_ENV_NAME]] = value
    if len(names) > MAX_ENV:
        rest = "\n".join(f"{n}={changed[n]}" for n in names[MAX_ENV:])
        out[f"<... {len(names) - MAX_ENV} more>"] = canon.sha256(rest.encode("utf-8", "surrogatepass")).hexdigest()
    return out


def argv_pool(uses: inputs.Uses, strings: list[str], ints: list[int], rng: random.Random) -> list[list[str]]:
    """Command lines: none, ``--help``, the positionals the parser declares, each option (a flag; a value
    of its ``choices``/``type``, a file the search writes or ``ABSENT``), then random mixes of them;
    without a parser, the mined literals (``-x``-like ones as options)."""
    words = [s for s in strings if 0 < len(s) <= 40 and "\0" not in s and not s.startswith("-")][:8]
    numbers = [str(i) for i in ints[:4]]

    def value(o: tuple[list[str], str, list[str], bool], i: int) -> str:
        pool = o[2] or {"int": [*numbers, "1", "0", "42", "-1"], "float": ["1.5", "0", "-2.5", *numbers],
                        "path": ["input.txt", "data.json", ABSENT]}.get(o[1]) or [*words, *numbers, "example"]
        return pool[i % len(pool)]

    commands = [o[0][0] for o in uses.options if o[1] == "command"]
    positionals = [o for o in uses.options if not o[0][0].startswith("-") and o[1] != "command"]
    options = [o for o in uses.options if o[0][0].startswith("-")]
    needed = [o for o in options if o[3]]

    def base(i: int) -> list[str]:
        out = [commands[i % len(commands)]] if commands else []
        for o in needed:
            out += [o[0][-1]] if o[1] == "flag" else [o[0][-1], value(o, i)]
        return out + [value(o, i) for o in positionals if o[3] or i % 2 == 0]

    out = [[], ["--help"], *(base(i) for i in range(8))]
    for o in options:
        out += [base(i) + ([o[0][i % len(o[0])]] if o[1] == "flag" else [o[0][i % len(o[0])], value(o, i)])
                for i in range(1 if o[1] == "flag" else 4)]
    loose = [s for s in strings if s.startswith("-") and 1 < len(s) <= 40][:8]  # ``if sys.argv[1] == "-r"``
    out += [[s] for s in loose] + [[s, w] for s in loose for w in [*words[:2], *numbers[:1], "1"]]
    if not uses.options:
        out += [[w] for w in [*words, *numbers, "1", "input.txt"]] + [["a", "b"], ["1", "2", "3"]]
    for _ in range(24 if uses.options or loose else 0):  # mixes: a few options over a base
        i = rng.randrange(8)
        extra = []
        for o in rng.sample(options, min(len(options), rng.randint(1, 3))):
            extra += [rng.choice(o[0])] if o[1] == "flag" else [rng.choice(o[0]), value(o, rng.randrange(8))]
        extra += [rng.choice(loose)] if loose else []
        out.append(base(i) + extra if rng.random() < 0.7 else extra + base(i))
    return [list(a) for a in dict.fromkeys(tuple(a) for a in out)]
