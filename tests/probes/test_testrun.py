"""Assert tests through the real sandbox (bubblewrap): every behaviour of the program is a result."""

from __future__ import annotations

import asyncio
import select
import socket
from pathlib import Path

import pytest

from calib._exceptions import InvalidParameterError
from calib.executors.sandbox import Sandbox, SandboxRun
from calib.probes.tasks import load_tasks
from calib.probes.testrun import TestJob, parse_run, run_many, run_tests

FIXTURE = Path(__file__).parent / "fixtures" / "tasks.jsonl"
DIGIT_TESTS = ("assert digit_sum(0) == 0", "assert digit_sum(7) == 7", "assert digit_sum(90817) == 25")


def run(sandbox: Sandbox, program: str, tests=DIGIT_TESTS, **kwargs):
    return asyncio.run(run_tests(sandbox, program, tests, **kwargs))


def test_every_reference_solution_passes_its_tests(sandbox):
    tasks = load_tasks(str(FIXTURE))
    jobs = [TestJob(t.code, t.tests, setup=t.setup) for t in tasks]
    jobs.append(TestJob("def digit_sum(n):\n    return n % 10\n", DIGIT_TESTS))  # keeps its place in the output
    results = asyncio.run(run_many(sandbox, jobs, concurrency=3))
    assert [r.all_passed for r in results] == [True] * len(tasks) + [False]
    assert all(r.status == "ok" and r.errors == (None, None, None) for r in results[:-1])
    assert results[-1].passed == (True, True, False)


def test_a_wrong_solution_fails_the_right_tests(sandbox):
    # last digit instead of the digit sum: 0 -> 0 and 7 -> 7 still hold, 90817 -> 7 != 25 does not
    result = run(sandbox, "def digit_sum(n):\n    return n % 10\n")
    assert result.status == "ok" and not result.all_passed
    assert result.passed == (True, True, False)
    assert result.errors == (None, None, "AssertionError")
    assert result.n_passed == 2


def test_syntax_error(sandbox):
    result = run(sandbox, "def digit_sum(n):\n    return n +\n")
    assert result.status == "syntax"
    assert result.passed == (False, False, False) and result.errors == ("syntax",) * 3
    assert result.message.startswith("SyntaxError in program: line 2")


def test_exception_type_and_message(sandbox):
    result = run(sandbox, "def digit_sum(n):\n    return {}[n]\n")
    assert result.errors == ("KeyError",) * 3 and result.messages == ("0", "7", "90817")
    own = run(sandbox, "class Bad(Exception):\n    pass\n\ndef digit_sum(n):\n    raise Bad('no')\n")
    assert own.errors == ("candidate.Bad",) * 3 and own.messages == ("no",) * 3


def test_program_and_setup_errors(sandbox):
    top = run(sandbox, "x = 1 / 0\n")
    assert top.status == "program_error" and top.errors == ("program_error",) * 3
    assert top.message == "ZeroDivisionError in program: division by zero"
    setup = run(sandbox, "def digit_sum(n):\n    return 0\n", setup="import calib_no_such_module")
    assert setup.status == "setup_error" and "ModuleNotFoundError in setup" in setup.message
    loop = run(sandbox, "while True:\n    pass\n", timeout=0.3)
    assert loop.status == "timeout" and loop.errors == ("timeout",) * 3


def test_an_endless_test_times_out_and_the_next_ones_run(sandbox):
    program = ("def digit_sum(n):\n"
               "    while n == 7:\n"
               "        pass\n"
               "    return sum(int(d) for d in str(n))\n")
    result = run(sandbox, program, timeout=0.3)
    assert result.status == "ok"
    assert result.passed == (True, False, True) and result.errors == (None, "timeout", None)
    assert result.messages[1] == "took longer than 0.3 s"


def test_a_loop_that_catches_the_timeout_once_still_times_out(sandbox):
    program = ("def digit_sum(n):\n"
               "    caught = 0\n"
               "    while n == 7:\n"
               "        if caught < 2:\n"  # swallows the first two alarms: a repeated one ends the test
               "            try:\n"
               "                while True:\n"
               "                    pass\n"
               "            except BaseException:\n"
               "                caught += 1\n"
               "        else:\n"
               "            while True:\n"
               "                pass\n"
               "    return sum(int(d) for d in str(n))\n")
    result = run(sandbox, program, timeout=0.3)
    assert result.status == "ok"
    assert result.passed == (True, False, True) and result.errors == (None, "timeout", None)


def test_a_loop_that_catches_every_timeout_ends_the_process(sandbox):
    program = ("def digit_sum(n):\n"
               "    while n == 7:\n"
               "        try:\n"
               "            while True:\n"
               "                pass\n"
               "        except BaseException:\n"
               "            pass\n"
               "    return sum(int(d) for d in str(n))\n")
    result = run(sandbox, program, timeout=0.3)
    assert result.status == "died" and result.passed == (True, False, False)
    assert result.errors == (None, "timeout", "died: test 1 could not be stopped")
    assert result.message == "the process died (test 1 could not be stopped)"
    top = run(sandbox, "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n"
                       "        pass\n", timeout=0.3)
    assert top.status == "timeout" and "caught every time-out" in top.message


def test_a_loop_that_disarms_the_alarm_meets_the_wall_clock(sandbox):
    program = ("import signal\n"
               "def digit_sum(n):\n"
               "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
               "    while n == 7:\n"
               "        pass\n"
               "    return 0\n")
    result = run(sandbox, program, timeout=0.3, wall_seconds=2.0)
    assert result.status == "died" and result.passed == (True, False, False)
    assert result.errors == (None, "died: timeout", "died: timeout")
    assert result.message.startswith("the process died (timeout) during test 1")


def test_output_cannot_forge_results(sandbox):
    forged = '{"event":"test","index":2,"passed":true,"error":null,"message":""}\\n{"event":"done"}\\n'
    program = ("import os, sys\n"
               "def digit_sum(n):\n"
               f"    print('{forged}' * 3)\n"
               f"    sys.stderr.write('{forged}')\n"
               f"    sys.__stdout__.write('{forged}'); sys.__stdout__.flush()\n"
               f"    os.write(1, b'{forged}')\n"
               f"    os.write(2, b'{forged}')\n"
               "    return n % 10\n")
    result = run(sandbox, program)
    assert result.status == "ok" and result.passed == (True, True, False)
    assert result.errors == (None, None, "AssertionError")


def test_processes_and_the_network_are_contained(sandbox, tmp_path):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    canary = tmp_path / "escaped"
    program = ("import os, socket, subprocess\n"
               "def forks():\n"
               "    return os.fork()\n"
               "def spawns():\n"
               f"    return subprocess.run(['touch', {str(canary)!r}]).returncode\n"
               "def connects():\n"
               f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).close()\n"
               "    return 'connected'\n")
    try:
        result = run(sandbox, program, ["assert forks() is not None", "assert spawns() == 0",
                                        "assert connects() == 'connected'"])
        readable, _, _ = select.select([server], [], [], 0)
    finally:
        server.close()
    assert result.status == "ok" and result.passed == (False, False, False)
    assert result.errors[:2] == ("SandboxDenied", "SandboxDenied")
    # no network namespace shared: the loopback inside has no listener (or no route)
    assert result.errors[2] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    assert not readable, "the host's listener received a connection"
    assert not canary.exists()


def test_a_program_that_kills_itself(sandbox):
    program = "import os, signal\ndef digit_sum(n):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    result = run(sandbox, program, ["assert 1 + 1 == 2", "assert digit_sum(1) == 1", "assert True"])
    assert result.status == "died" and result.passed == (True, False, False)
    assert result.errors == (None, "died: signal SIGKILL", "died: signal SIGKILL")
    exits = run(sandbox, "import os\ndef digit_sum(n):\n    os._exit(0)\n")
    assert exits.status == "died" and exits.errors[0] == "died: exit 0 before reporting every test"


def test_tests_do_not_see_each_others_names(sandbox):
    tests = ["digit_sum = lambda n: -1\nassert digit_sum(5) == -1", "assert digit_sum(5) == 5"]
    result = run(sandbox, "def digit_sum(n):\n    return sum(map(int, str(n)))\n", tests)
    assert result.passed == (True, True)


def test_a_main_block_does_not_run(sandbox):
    program = "def digit_sum(n):\n    return sum(map(int, str(n)))\nif __name__ == '__main__':\n    input()\n"
    assert run(sandbox, program).all_passed


def test_parameters_are_checked(sandbox):
    with pytest.raises(InvalidParameterError, match="tests must be a sequence of test statements, not one string"):
        run(sandbox, "x = 1", "assert x == 1")
    with pytest.raises(InvalidParameterError, match="tests is empty"):
        run(sandbox, "x = 1", [])
    with pytest.raises(InvalidParameterError, match="timeout must be a positive number"):
        run(sandbox, "x = 1", ["assert x"], timeout=0)
    with pytest.raises(InvalidParameterError, match="concurrency must be an integer >= 1"):
        asyncio.run(run_many(sandbox, [], concurrency=0))


def test_unreadable_harness_output_is_an_error_status():
    # parse_run reads what a batch wrote: a channel with a garbled line is not believed
    garbled = SandboxRun(returncode=0, stdout=b'{"event":"test","index":0,"passed":true,"error":null}\nnot json\n'
                         b'{"event":"done"}\n', stderr=b"", timed_out=False, output_exceeded=False, seconds=0.1)
    result = parse_run(garbled, 1)
    assert result.status == "error" and result.passed == (True,) and not result.all_passed
    clean = SandboxRun(returncode=0, stdout=b'{"event":"test","index":0,"passed":true,"error":null}\n'
                       b'{"event":"done"}\n', stderr=b"", timed_out=False, output_exceeded=False, seconds=0.1)
    assert parse_run(clean, 1).all_passed
    # killed while writing its second result: the cut line is not garbage, the test without a result failed
    cut = SandboxRun(returncode=-9, stdout=b'{"event":"test","index":0,"passed":true,"error":null}\n'
                     b'{"event":"start","index":1}\n{"event":"te', stderr=b"", timed_out=True, output_exceeded=False,
                     seconds=3.0)
    died = parse_run(cut, 2)
    assert died.status == "died" and died.errors == (None, "died: timeout")
    assert died.message == "the process died (timeout) during test 1"
