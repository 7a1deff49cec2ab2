"""Output states that differed between x's runs for reasons unrelated to behaviour (issue 24 §2).

Two sources, each found as inputs marked ``nondeterministic`` (x's replay, in a batch of its own, disagreed with
the search's run) on the third package list's seeds 1-5:

- a default ``repr`` inside a text x made (arpeggio's ``ParseTreeNode.visit`` logs ``"Visiting %s" % node``):
  the address in it is the process's; the canonical form blanks addresses in texts ``repr`` wrote, and now
  also those that end a text's default ``repr`` (``<Node object at 0x…>``), never other hex digits;
- ``/tmp`` shared by a batch's inputs: ``tempfile.mkdtemp()`` draws another name past one an earlier input
  left (diskcache's ``FanoutCache.index``, 6 inputs of 10); in the sandbox, what an input leaves in ``/tmp``
  is removed before the next;
- the module's names (``globals()``, read by x): in the search, the comparison recorder was one of them, and not in
  the replay (since the twenty-sixth round it is a builtin of the exploring process);
- a thread x keeps: its identifiers (``_ident``, ``_native_id``) are the process's, left out of its state;
- ``id()`` numbered addresses, so an object made where a dead one was took that one's number, as the process's
  allocator decided: it numbers objects now;
- a profile x prints: ``cProfile`` reads its own clock, the frozen one now.
"""

from __future__ import annotations

import json

import pytest

from calib.executors.sandbox.harness import canon
from tests.executors.python.test_clock_values import _compare
from tests.executors.sandbox.test_forkserver import needs_bwrap


class Node:
    pass


def test_a_default_repr_in_a_text_has_no_address() -> None:
    text = "visiting %s" % Node()
    assert canon.canonical(text) == f"visiting <{__name__}.Node object at 0x?>"
    assert canon.canonical([text]) == canon.canonical([f"visiting {Node()!r}"])  # the fast paths too
    assert canon.canonical({text: text}) == canon.canonical({f"visiting {Node()!r}": f"visiting {Node()!r}"})
    for kept in ("0xffff", "at 0xffff", "jump at 0x12345678 now", "0x7f10e87291d0>"):
        assert canon.canonical(kept) == kept  # hex digits of x's own: a difference between values stays one


@needs_bwrap
def test_a_function_logging_its_objects_is_deterministic() -> None:
    result = _compare("def visit(name, depth):\n    node = Node(name)\n"
                      "    return 'visiting %s at depth %d' % (node, depth)\n",
                      "class Node:\n    def __init__(self, name):\n        self.name = name\n\n")
    # before: every input nondeterministic (the address differs between x's search and its replay)
    assert result.conclusive, result.reason
    assert not [i for i in result.inputs if i.reason == "nondeterministic"]


@needs_bwrap
def test_temporary_names_do_not_depend_on_earlier_inputs() -> None:
    result = _compare("def scratch(n):\n    path = tempfile.mkdtemp(prefix='job-')\n"
                      "    return os.path.basename(path), n * 2\n", "import os\nimport tempfile\n\n")
    # before: an input's name depended on the directories earlier inputs of its batch had left
    assert result.conclusive, result.reason
    names = {i.output.split('"tuple":["')[1].split('"')[0] for i in result.inputs if i.valid and '"tuple"' in i.output}
    assert len(names) == 1 and next(iter(names)).startswith("job-")


# The module's own names, as x sees them (dpkt's ``__load_protos`` hands ``globals()`` to a dependency): the search's
# comparison recorder was one of them, and the replay (uninstrumented) has none, so every input differed.
NAMES_CONTEXT = "LIMIT_LOW = 1\nLIMIT_HIGH = 2\nMODE = 'fast'\n\n"
NAMES_WITH = (
    "def names_with(prefix):\n"
    "    names = sorted(k for k in globals() if k.startswith(prefix))\n"
    "    if not names:\n"
    "        return None\n"
    "    return len(globals()), names\n"
)


@needs_bwrap
def test_a_function_reading_its_modules_globals_is_deterministic() -> None:
    # at 1a28006: coverage 0.75 (every input that returned the names was nondeterministic: len(globals()) counted the
    # recorder in the search only)
    result = _compare(NAMES_WITH, NAMES_CONTEXT)
    assert result.conclusive, result.reason
    assert all(i.reason != "nondeterministic" for i in result.inputs)
    outputs = [json.loads(i.output).get("return") for i in result.inputs if i.valid]  # (a list prefix raises)
    named = [o for o in outputs if o is not None]
    assert named and all("__calib_cmp__" not in json.dumps(o) for o in named)
    # the count is the module's names and the harness's own (its line probes, ``id``), the same in every input
    assert len({o["tuple"][0] for o in named}) == 1


# A thread x starts and keeps (avro's ``TaskRunner.start``): its kernel task id counts the threads and processes the
# batch made before, so the search's process and the replay's gave it different numbers.
WORKER_CONTEXT = (
    "import threading\n\n\n"
    "class Worker:\n"
    "    def __init__(self):\n"
    "        self.results = []\n\n"
)
WORKER_START = (
    "    def start(self, n):\n"
    "        self.thread = threading.Thread(target=self.results.append, args=(n,))\n"
    "        self.thread.start()\n"
    "        self.thread.join()\n"
    "        return len(self.results)\n"
)


def test_a_threads_identifiers_are_not_its_state() -> None:
    import threading

    thread = threading.Thread(target=len, args=("ab",), name="worker")
    before = canon.canonical(thread)
    thread.start()
    thread.join()
    state = dict(canon.canonical(thread)["state"])
    assert "_ident" not in state and "_native_id" not in state
    assert state["_name"] == "worker" and state["_is_stopped"] is True  # what the code did stays
    assert dict(before["state"])["_is_stopped"] is False


@needs_bwrap
def test_a_method_keeping_its_thread_is_deterministic() -> None:
    # at 8c4a2bd: coverage 0.00, every input nondeterministic (the thread's _native_id differed in the replay)
    result = _compare(WORKER_START, WORKER_CONTEXT)
    assert result.conclusive, result.reason
    assert all(i.reason != "nondeterministic" for i in result.inputs)


class Token:
    pass


def _new_input(env) -> None:
    """What ``env.reset`` does to the ids at each input (without reseeding this process's random sources)."""
    env._ids.clear()
    env._numbered.clear()


def test_an_id_numbers_the_object_not_its_address() -> None:
    from calib.executors.sandbox.harness import env

    _new_input(env)
    first = Token()
    number = env.stable_id(first)
    assert number == env.ID_BASE and env.stable_id(first) == number  # the same object: the same number
    address = id(first)
    del first
    second = None
    for _ in range(100):  # another object where the dead one was (CPython reuses a freed object's memory)
        made = Token()
        if id(made) == address:
            second = made
            break
        del made
    if second is None:
        pytest.skip("the allocator did not reuse the address")
    # before: the number of the dead object, so that x's output depended on where the process's allocator put it
    assert env.stable_id(second) == env.ID_BASE + 16
    items = [[], {}, (1, 2)]  # objects without weak references are held until the next input
    assert [env.stable_id(v) for v in items] == [env.ID_BASE + 16 * k for k in (2, 3, 4)]
    _new_input(env)
    assert env.stable_id(second) == env.ID_BASE  # numbered afresh for each input


# A profile x prints (monty's ``prof_main``): cProfile reads its own clock in C.
PROFILED = (
    "def profiled(n):\n"
    "    profiler = cProfile.Profile()\n"
    "    profiler.enable()\n"
    "    total = sum(i * i for i in range(n))\n"
    "    profiler.disable()\n"
    "    out = io.StringIO()\n"
    "    pstats.Stats(profiler, stream=out).sort_stats('tottime').print_stats()\n"
    "    return total, out.getvalue()\n"
)


@needs_bwrap
def test_a_profile_x_prints_is_deterministic() -> None:
    # at a27c51b: valid_inputs 7 < 8, the others nondeterministic (the profile's times, and the order of functions
    # sorted by them)
    result = _compare(PROFILED, "import cProfile\nimport io\nimport pstats\n\n")
    assert result.conclusive, result.reason
    texts = [json.loads(i.output)["return"]["tuple"][1] for i in result.inputs if i.valid and '"return"' in i.output]
    assert texts and all(" in 0.000 seconds" in t for t in texts)  # the frozen clock does not move
    for text in texts:  # every time 0: the functions in the order of their places, the builtins ('~') last, as
        rows = [line for line in text.splitlines() if line.split()[1:2] == ["0.000"]]  # in every process (the C
        places = [row.split(None, 5)[5] for row in rows]  # profiler lists them by address)
        assert places == sorted(places, key=lambda place: (place.startswith("{"), place))
