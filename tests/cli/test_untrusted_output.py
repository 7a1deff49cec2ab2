"""Untrusted text in what ``calib compare`` and ``calib similarity`` print (docs/cli.md, "Untrusted text
in the output").

The hostile programs run for real: ``calib compare`` as a subprocess compiles and runs them in the
sandbox. What is checked is what reaches a terminal: no control character but the line ends, no ANSI
escape, no BiDi override, no line that looks like calib's own; the escapes in their place; JSON that
parses; and a named pipe refused with one line instead of a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from calib.cli._untrusted import json_text, shown
from tests.cli._helpers import Outcome
from tests.executors.native.test_native import needs

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

# ESC [2J (clear screen), CSI as one C1 character, RIGHT-TO-LEFT OVERRIDE, BEL, what a forged line says
HOSTILE = "\x1b[2J\x9b31m\u202e\x07cand.c: sim_func 1.00 (>= tau_func)"
SHOWN = "\\x1b[2J\\x9b31m\\u202e\\x07cand.c: sim_func 1.00 (>= tau_func)"


def _calib(*args: str | bytes, cwd: Path) -> Outcome:
    env = {k: v for k, v in os.environ.items() if k != "CALIB_DEBUG"}
    # a guard against a hang only (the FIFO case), not a measured bound
    done = subprocess.run([sys.executable, "-m", "calib", *args], cwd=cwd, env=env, capture_output=True,
                          timeout=600, check=False)
    return Outcome(done.returncode, done.stdout.decode("utf-8", "surrogateescape"),
                   done.stderr.decode("utf-8", "surrogateescape"))


def _terminal_safe(text: str) -> None:
    """No character that moves the cursor, recolours, reorders or breaks a line, except the line ends."""
    bad = [(i, hex(ord(ch))) for i, ch in enumerate(text)
           if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")]
    assert not bad, (bad, text)


def test_shown_escapes_each_unsafe_category_and_keeps_the_rest():
    assert shown("plain ünïcode 名前 text") == "plain ünïcode 名前 text"
    assert shown("a\x1b[31mb") == "a\\x1b[31mb"  # C0 (ESC)
    assert shown("a\rb\nc\td\x7f") == "a\\x0db\\x0ac\\x09d\\x7f"  # CR, LF, TAB, DEL
    assert shown("\x9b\x85") == "\\x9b\\x85"  # C1: CSI, NEL
    assert shown("\u202eabc\u2066\u200b") == "\\u202eabc\\u2066\\u200b"  # BiDi override, isolate, zero width
    assert shown("\u2028\u2029") == "\\u2028\\u2029"  # line and paragraph separators
    assert shown("x\ud800y\udcff") == "x\\ud800y\\udcff"  # lone surrogates
    assert shown("\U000e0001") == "\\U000e0001"  # LANGUAGE TAG (a format character outside the BMP)
    shown("\ud800").encode("ascii")  # printable as ASCII: no surrogate left to fail the write


def test_json_text_is_ascii_strict_json_even_with_surrogates_and_nan():
    text = json_text({"path": "a\udcffb", "coverage": float("nan"), "xs": [float("inf"), 1.5], "s": "\x1b"})
    text.encode("ascii")
    assert json.loads(text) == {"path": "a\udcffb", "coverage": None, "xs": [None, 1.5], "s": "\x1b"}


@needs("c")
def test_compare_escapes_compiler_messages_and_run_reasons_from_hostile_c(tmp_path: Path):
    (tmp_path / "x.c").write_text("int twice(int n) { return 2 * n; }\n")
    # a syntax error on a line holding the hostile text: gcc quotes that line in its message
    (tmp_path / "cand.c").write_text(f"int twice(int n) {{ return n * 2 }} /* {HOSTILE} */\n")
    # a truth that writes the hostile text on stderr and exits before the harness is ready
    literal = "".join(f"\\x{b:02x}" for b in HOSTILE.encode())  # a C string literal, every byte escaped
    (tmp_path / "dies.c").write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n"
        "__attribute__((constructor)) static void early(void) { fputs(\"" + literal + "\", stderr); exit(1); }\n"
        "int twice(int n) { return 2 * n; }\n")
    run = _calib("compare", "--language", "c", "x.c", "cand.c", cwd=tmp_path)
    assert run.code == 0, run.err
    _terminal_safe(run.out)
    lines = run.out.splitlines()
    assert len(lines) == 3 and lines[0] == "conclusive: yes"
    assert lines[2].startswith("cand.c: sim_func 0.00  xxxxxxxxxx [unparsable: compile error")
    assert SHOWN in lines[2]

    died = _calib("compare", "--language", "c", "dies.c", "cand.c", cwd=tmp_path)
    assert died.code == 0, died.err
    _terminal_safe(died.out)
    first = died.out.splitlines()[0]
    assert first.startswith("conclusive: no (valid_inputs 0 < 8 (mostly harness failed: ")
    assert SHOWN in first
    data = _calib("compare", "--language", "c", "--json", "dies.c", "cand.c", cwd=tmp_path).json()
    assert HOSTILE in data["reason"]  # JSON keeps the text itself, escaped as JSON


@needs_bwrap
def test_compare_prints_a_path_with_a_lone_surrogate_instead_of_crashing(tmp_path: Path):
    (tmp_path / "x.py").write_text("def f(n):\n    return n * 2\n")
    name = b"cand\xff.py"  # not UTF-8: Python holds it as the lone surrogate U+DCFF
    (tmp_path / os.fsdecode(name)).write_bytes(b"def f(n):\n    return n + n\n")
    run = _calib("compare", "x.py", name, cwd=tmp_path)
    assert run.code == 0, run.err
    _terminal_safe(run.out)
    assert run.out.splitlines()[2].startswith("cand\\udcff.py: sim_func 1.00")
    data = _calib("compare", "--json", "x.py", name, cwd=tmp_path).json()
    assert data["candidates"][0]["path"] == "cand\udcff.py" and data["candidates"][0]["sim_func"] == 1.0


def test_a_named_pipe_argument_is_refused_with_one_line(tmp_path: Path):
    (tmp_path / "x.py").write_text("def f(n):\n    return n\n")
    os.mkfifo(tmp_path / "pipe.py")  # nothing ever writes to it: reading it would wait forever
    err = _calib("compare", "x.py", "pipe.py", cwd=tmp_path).one_line_error()
    assert err == ("calib: error: pipe.py: the candidate file is a named pipe (FIFO), not a regular file; save its "
                   "content to a file and pass that")
    err = _calib("compare", "pipe.py", "x.py", cwd=tmp_path).one_line_error()
    assert "pipe.py: the truth file is a named pipe (FIFO)" in err


def test_similarity_escapes_hostile_file_names_and_keeps_json_valid(tmp_path: Path):
    ref = tmp_path / "ref.py"
    ref.write_text("def f(n):\n    return n * 2\n")
    cand = tmp_path / "cand\x1b[2J\u202e.py"
    cand.write_text("def f(n):\n    return n + n\n")
    run = _calib("similarity", "--metrics", "exact,edit", "ref.py", cand.name, cwd=tmp_path)
    assert run.code == 0, run.err
    _terminal_safe(run.out)
    assert run.out.splitlines()[0] == "ref.py vs cand\\x1b[2J\\u202e.py (python)"
    data = _calib("similarity", "--metrics", "exact,edit", "--json", "ref.py", cand.name, cwd=tmp_path).json()
    assert data["exact"] == 0.0 and data["language"] == "python"
