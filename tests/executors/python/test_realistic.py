"""The sandbox executor on realistic functions, end to end through bubblewrap.

Each test states what an auditor would check on a :class:`~calib.executors.base.Comparison`: whether it
is conclusive and why not, SIM_func per candidate, which inputs match, and what the output states hold
(docs/architecture.md, "Execution semantics"). The input search gets a small budget so the module stays fast.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig, execution_rows
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import canon
from calib.executors.sandbox.harness.values import decode

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def compare(truth, *candidates, context="", inputs=None, **settings):
    settings.setdefault("budget_seconds", 2.0)
    executor = SandboxExecutor(ExecutorConfig(**settings))
    assert executor.sandbox.isolated
    return asyncio.run(executor.compare(truth, list(candidates), context=context, inputs=inputs))


def outputs(comparison):
    """x's canonical output state per input, parsed."""
    return [json.loads(item.output) for item in comparison.inputs]


def sims(comparison):
    return [c.sim_func for c in comparison.candidates]


def where(comparison, predicate):
    """The matches a candidate must have when it agrees with x exactly where ``predicate(x's output)``."""
    return tuple(bool(predicate(json.loads(i.output))) if i.valid else None for i in comparison.inputs)


def raised(out):
    return "exception" in out


# --- context: constants, helpers, classes --------------------------------------------------------------

SCORE_CONTEXT = '''import math

SCALE = 3
LIMIT = 100


def _clip(value):
    return min(value, LIMIT)

'''
SCORE = '''def score(n, bonus=0):
    if n < 0:
        raise ValueError("negative")
    total = n * SCALE + bonus
    return _clip(total)
'''


def test_a_function_uses_the_constants_and_helpers_of_its_file():
    same = "def score(n, bonus=0):\n    if n < 0:\n        raise ValueError(n)\n    return _clip(SCALE * n + bonus)\n"
    unclipped = SCORE.replace("_clip(total)", "total")
    result = compare(SCORE, same, unclipped, context=SCORE_CONTEXT)
    assert result.conclusive, result.reason
    assert result.reason == ""
    assert result.valid_inputs == 10 and result.coverage == 1.0 and result.distinct_outputs >= 2
    assert result.warnings == ()  # nothing in this context needed a stand-in
    assert 100 in [out.get("return") for out in outputs(result)]  # the search reached the helper's clip
    same_result, unclipped_result = result.candidates
    assert same_result.sim_func == 1.0 and same_result.outcome == "ran"
    # the unclipped rewrite differs exactly where the helper clips
    assert unclipped_result.matches == where(result, lambda out: out.get("return") != 100)
    assert 0 < unclipped_result.sim_func < 1


def test_the_exception_type_is_part_of_the_output_state():
    wrong_type = SCORE.replace("raise ValueError", "raise TypeError")
    other_message = SCORE.replace('"negative"', '"n must be >= 0"')
    result = compare(SCORE, wrong_type, other_message, context=SCORE_CONTEXT)
    assert result.conclusive, result.reason
    value_errors = [out.get("exception") == "ValueError" for out in outputs(result)]
    assert any(value_errors) and not all(value_errors)
    assert [i.status == "raised" for i in result.inputs] == [raised(out) for out in outputs(result)]
    wrong, message = result.candidates
    assert wrong.matches == where(result, lambda out: out.get("exception") != "ValueError")
    assert wrong.sim_func == pytest.approx(1 - sum(value_errors) / result.valid_inputs)
    assert message.sim_func == 1.0  # the type is compared, not the message


ACCOUNT = '''class Account:
    FEE = 2

    def __init__(self, owner="ann", balance=10):
        self.owner = owner
        self.balance = balance
        self.history = []

'''
WITHDRAW = '''    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        if amount + self.FEE > self.balance:
            self.history.append(("refused", amount))
            return False
        self.balance -= amount + self.FEE
        self.history.append(("withdraw", amount))
        return True
'''


def test_a_method_runs_on_an_instance_of_its_context_class():
    rewrite = '''    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("bad amount")
        cost = amount + self.FEE
        if cost > self.balance:
            self.history.append(("refused", amount))
            return False
        self.balance = self.balance - cost
        self.history.append(("withdraw", amount))
        return True
'''
    one_branch = WITHDRAW.replace('("refused", amount)', '("denied", amount)')
    result = compare(WITHDRAW, rewrite, one_branch, context=ACCOUNT)
    assert result.conclusive, result.reason
    # self is an Account built by the context's constructor (with the input's arguments: its owner
    # attribute exists), and its changes are output
    changed = [out["self"] for out in outputs(result) if "self" in out]
    assert changed and all(s["object"] == "Account" for s in changed)
    assert all(any(key == "owner" for key, _ in s["state"]) for s in changed)
    assert all(str(i.state["self"]).startswith("New('Account'") for i in result.inputs)
    same, differs = result.candidates
    assert same.sim_func == 1.0
    # the rewrite of the refusal branch differs exactly where x refused
    assert differs.matches == where(result, lambda out: '"refused"' not in json.dumps(out))
    assert 0 < differs.sim_func < 1


def test_static_and_class_methods_run_without_an_instance():
    context = "class Temperature:\n    OFFSET = 32\n\n"
    static = "    @staticmethod\n    def to_f(c):\n        return c * 9 / 5 + 32\n"
    classmethod_ = "    @classmethod\n    def to_f(cls, c):\n        return c * 9 / 5 + cls.OFFSET\n"
    off_by_one = classmethod_.replace("cls.OFFSET", "cls.OFFSET - 1")
    result = compare(static, classmethod_.replace("cls, ", "").replace("cls.OFFSET", "32").replace(
        "@classmethod", "@staticmethod"), context=context)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0]
    result = compare(classmethod_, classmethod_, off_by_one, static, context=context)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.0, 1.0]  # a staticmethod computing the same is the same function


def test_new_is_given_its_class_as_python_gives_it():
    # __new__ is a static method Python passes the class to: super().__new__(cls) needs the real class
    context = "class Point(tuple):\n    ORIGIN = 0\n\n"
    new = ("    def __new__(cls, x: int, y: int = 0):\n        if x < cls.ORIGIN:\n            x = -x\n"
           "        return super().__new__(cls, (x, y))\n")
    swapped = new.replace("(x, y)", "(y, x)")
    result = compare(new, new, swapped, context=context)
    assert result.conclusive, result.reason
    assert "TypeError" not in {json.loads(i.output).get("exception") for i in result.inputs}
    assert all(json.loads(i.output)["return"]["type"] == "Point" for i in result.inputs if i.valid)
    assert sims(result)[0] == 1.0 and sims(result)[1] < 1.0


# --- mocked dependencies: the call log ---------------------------------------------------------------

HTTP_CONTEXT = 'import requests\n\nBASE = "https://api.example.com"\n\n'
FETCH = '''def fetch_user(user_id, verbose=False):
    resp = requests.get(f"{BASE}/users/{user_id}", timeout=5)
    if verbose:
        print("fetched", user_id)
    return resp.json()
'''


def test_calls_to_an_http_client_are_logged_and_compared():
    same = '''def fetch_user(user_id, verbose=False):
    url = BASE + "/users/" + str(user_id)
    response = requests.get(url, timeout=5)
    if verbose:
        print("fetched", user_id)
    return response.json()
'''
    other_url = FETCH.replace("/users/", "/accounts/")
    other_method = FETCH.replace("requests.get", "requests.post")
    no_timeout = FETCH.replace(", timeout=5", "")
    result = compare(FETCH, same, other_url, other_method, no_timeout, context=HTTP_CONTEXT)
    assert result.conclusive, result.reason
    assert any("mocked" in w for w in result.warnings)  # requests is never imported in the sandbox
    for item, out in zip(result.inputs, outputs(result)):
        user_id = decode(item.state["args"]["user_id"])
        assert out["calls"][0] == ["call", "requests.get", {"list": [f"https://api.example.com/users/{user_id}"]},
                                   {"dict": [["timeout", 5]]}]
        if "return" in out:  # (an input state may also have the client's calls return None, or raise)
            assert out["calls"][1][:2] == ["call", "requests.get().json"]
            assert out["return"] == {"standin": "requests.get().json()"}
    assert sims(result) == [1.0, 0.0, 0.0, 0.0]


def test_a_callback_registered_with_an_unresolvable_object_is_part_of_the_behaviour():
    context = "from app.events import bus\n\n\ndef on_save(doc):\n    return doc\n\n"
    truth = '''def register(name, verbose=False):
    if verbose:
        print("registering", name)
    bus.subscribe(on_save)
    return name.upper()
'''
    forgets = truth.replace("    bus.subscribe(on_save)\n", "")
    result = compare(truth, truth, forgets, context=context)
    assert result.conclusive, result.reason
    for out in outputs(result):  # a function is its name and its code (docs/executors.md, "Output states")
        ((kind, name, args, kwargs),) = out["calls"]
        assert (kind, name, kwargs) == ("call", "app.events.bus.subscribe", {"dict": []})
        assert [a["function"] for a in args["list"]] == ["on_save"] and len(args["list"][0]["code"]) == 64
    assert sims(result) == [1.0, 0.0]  # subscribe() is called before anything can raise


# --- files, printing, mutated arguments --------------------------------------------------------------

SAVE = '''def save_report(path, lines):
    with open(path, "w") as fh:
        for line in lines:
            fh.write(str(line) + "\\n")
    return len(lines)
'''


def test_files_written_are_part_of_the_output_state():
    crlf = SAVE.replace('"\\n"', '"\\r\\n"')
    result = compare(SAVE, SAVE, crlf)
    assert result.conclusive, result.reason
    written = [out["files"] for out in outputs(result)]
    assert any(text.endswith("\n") for files in written for text in files.values())
    same, different = result.candidates
    assert same.sim_func == 1.0
    # equal only where no line was written
    assert different.matches == where(result, lambda out: not any(out["files"].values()))
    assert different.sim_func < 1


def test_printed_output_and_mutated_arguments_are_part_of_the_output_state():
    truth = "def add_tag(tags, tag):\n    print('adding', tag)\n    tags.append(tag)\n"
    same = "def add_tag(tags, tag):\n    print('adding', tag)\n    tags.append(tag)\n    return None\n"
    copies = "def add_tag(tags, tag):\n    print('adding', tag)\n    tags = tags + [tag]\n"
    silent = "def add_tag(tags, tag):\n    tags.append(tag)\n"
    result = compare(truth, same, copies, silent)
    assert result.conclusive, result.reason
    grown = 0
    for item, out in zip(result.inputs, outputs(result)):
        assert out["stdout"] == f"adding {decode(item.state['args']['tag'])}\n"
        tags, tag = decode(item.state["args"]["tags"]), decode(item.state["args"]["tag"])
        if isinstance(tags, list):  # the argument after the call: [[tags + [tag], tag], {}]
            assert out["args"] == canon.canonical([[[*tags, tag], tag], {}])
            grown += 1
    assert grown >= 5
    assert sims(result)[0] == 1.0
    # the copy leaves the caller's list (or a stand-in's append log) unchanged: it matches nowhere x mutated
    assert result.candidates[1].matches == where(result, lambda out: "args" not in out and not out["calls"])
    assert sims(result)[2] == 0.0  # nothing printed


# --- ambient state: randomness and the clock -----------------------------------------------------------


def test_seeded_randomness_matches_identical_code_and_reruns_are_identical():
    context = "import random\n\n"
    truth = "def jitter(x):\n    return x + random.random()\n"
    doubled = "def jitter(x):\n    return x + 2 * random.random()\n"
    first = compare(truth, truth, doubled, context=context)
    assert first.conclusive, first.reason
    assert sims(first) == [1.0, 0.0]
    again = compare(truth, truth, doubled, context=context)
    assert again.to_dict(outputs=True) == first.to_dict(outputs=True)


def test_the_clock_is_frozen():
    context = "from datetime import datetime\n\n"
    truth = 'def stamp(label):\n    return f"{label}@{datetime.now().isoformat()}"\n'
    hard_coded = 'def stamp(label):\n    return f"{label}@2024-01-02T03:04:05"\n'
    result = compare(truth, hard_coded, context=context)
    assert result.conclusive, result.reason
    assert all(i.valid for i in result.inputs)  # the replay in a fresh process saw the same time
    assert all(out["return"].endswith("@2024-01-02T03:04:05") for out in outputs(result))
    assert sims(result) == [1.0]


def test_a_frozen_clock_kept_as_a_class_attribute_is_called_without_self():
    # ``clock = time.time`` in a class body: the real builtin does not bind as a method, so neither may
    # the frozen one (a plain function would be called with self and raise TypeError)
    context = "import time\n\n\nclass Timer:\n    clock = time.time\n    ticks = time.monotonic_ns\n\n"
    truth = "def stamp(n):\n    t = Timer()\n    return [t.clock() + n, t.ticks() > 0]\n"
    inputs = [{"args": {"n": repr(n)}} for n in range(8)]
    result = compare(truth, truth, context=context, inputs=inputs, n_inputs=8)
    assert all(i.valid for i in result.inputs), [i.output for i in result.inputs]
    assert not any(raised(out) for out in outputs(result))
    assert sims(result) == [1.0]


def test_an_input_that_leaves_threads_running_is_invalid_and_the_next_runs_in_a_fresh_process():
    # a thread the code started still spins after x returned: x's output state is not final, and the
    # thread would act during the next inputs (a pool's workers do): that input is invalid, the batch ends
    # there and the rest run in a new process
    context = "import threading\n\n"
    truth = ("def spawn(n, forever=False):\n"
             "    worker = threading.Thread(target=(lambda: [None for _ in iter(int, 1)]) if forever else list,\n"
             "                              daemon=True)\n"
             "    worker.start()\n"
             "    return n * 2\n")
    inputs = [{"args": {"n": repr(n), "forever": repr(n % 3 == 1)}} for n in range(9)]
    result = compare(truth, truth, context=context, inputs=inputs, n_inputs=9, min_valid=6)
    statuses = [(i.valid, i.reason) for i in result.inputs]
    assert statuses == [(n % 3 != 1, "" if n % 3 != 1 else statuses[n][1]) for n in range(9)], statuses
    assert all("threads" in reason for valid, reason in statuses if not valid), statuses
    assert [json.loads(i.output).get("return") for i in result.inputs if i.valid] == [0, 4, 6, 10, 12, 16]
    assert result.conclusive and sims(result) == [1.0]


def test_a_search_over_a_function_that_always_leaves_threads_running_ends_inconclusive():
    context = "import threading\n\n"
    truth = ("def serve(port):\n"
             "    threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\n"
             "    return port + 1\n")
    result = compare(truth, truth, context=context)
    assert not result.conclusive and "threads left running" in result.reason


def test_object_ids_the_code_passes_on_are_the_same_in_every_run():
    # pickle's memo keys objects by id(obj): with real addresses every process logs other numbers and
    # x's replay never matches x; the code sees ids numbered in the order it asks for them
    context = "seen = None\n\n"
    truth = ("def remember(items, cache):\n"
             "    keys = [id(item) for item in items]\n"
             "    for key in keys:\n"
             "        cache.get(key)\n"
             "    return [k - keys[0] for k in keys], id(items) == id(items)\n")
    inputs = [{"args": {"items": repr([[i]] * (i % 3) + [[i, i]]), "cache": "StandIn('cache')"}} for i in range(8)]
    result = compare(truth, truth, context=context, inputs=inputs, n_inputs=8)
    assert [i.reason for i in result.inputs] == [""] * 8
    assert result.conclusive and sims(result) == [1.0]
    assert '"cache.get",{"list":[139637976727552]}' in result.inputs[0].output.replace(" ", "")


def test_a_random_generator_the_code_makes_without_a_seed_draws_the_same_in_every_run():
    # Random() seeds itself from the system's entropy in C (not through os.urandom)
    context = "import random\n\n"
    truth = ("def shuffled(n):\n    rng = random.Random()\n    items = list(range(n))\n    rng.shuffle(items)\n"
             "    return items\n")
    inputs = [{"args": {"n": repr(n)}} for n in range(2, 10)]
    result = compare(truth, truth, context=context, inputs=inputs, n_inputs=8)
    assert [i.reason for i in result.inputs] == [""] * 8
    assert result.conclusive and sims(result) == [1.0]


def test_the_shared_generator_reseeded_without_a_seed_and_the_pid_are_the_same_in_every_run():
    # random.seed() with no argument draws from the system's entropy in C; os.getpid() differs between
    # processes (a fork server's children all have other pids): log records carry it
    context = "import logging, io, os, random\n\n"
    truth = ("def stamp(n):\n    random.seed()\n    out = io.StringIO()\n    handler = logging.StreamHandler(out)\n"
             "    handler.setFormatter(logging.Formatter('%(process)d %(message)s'))\n"
             "    log = logging.getLogger('stamp')\n    log.addHandler(handler)\n"
             "    log.warning('%s', random.random() * n)\n    log.removeHandler(handler)\n"
             "    return out.getvalue(), os.getpid(), os.getppid()\n")
    inputs = [{"args": {"n": repr(n)}} for n in range(1, 9)]
    result = compare(truth, truth, context=context, inputs=inputs, n_inputs=8)
    assert [i.reason for i in result.inputs] == [""] * 8
    assert result.conclusive and sims(result) == [1.0]
    first = outputs(result)[0]["return"]["tuple"]
    assert first[0].startswith("2 ") and first[1:] == [2, 1]  # what a batch alone in its sandbox saw


def test_a_loop_that_turns_only_on_stand_ins_ends_long_before_the_input_timeout():
    # ``pos`` comes back from a stand-in, reads as index 0, and ``pos += 1`` gives another stand-in: the
    # loop never ends by itself (tomllib's parse_key, its helpers withheld); past 10,000 stand-in
    # operations the input is invalid (standin_loop) instead of holding the batch for input_timeout
    context = "from withheld import next_part\n\n"
    truth = ("def parse(src, pos):\n    parts = []\n    while src[pos] == '.':\n"
             "        pos, part = next_part(src, pos)\n        parts.append(part)\n        pos += 1\n"
             "    return len(parts)\n")
    inputs = [{"args": {"src": "'.a'", "pos": "StandIn('pos')"}}, {"args": {"src": "'a.'", "pos": "0"}}]
    result = compare(truth, truth, context=context, inputs=inputs, input_timeout=30.0, n_inputs=2, min_valid=1)
    assert [i.reason for i in result.inputs] == ["standin_loop", ""]  # not "timeout" (the 30 s timer)
    assert json.loads(result.inputs[1].output)["return"] == 0


def test_time_sleep_returns_at_once_and_advances_the_frozen_clock():
    context = "import time\n\n"
    truth = "def waited(seconds):\n    t0 = time.time()\n    time.sleep(seconds)\n    return time.time() - t0\n"
    inputs = [{"args": {"seconds": repr(s)}} for s in (0, 0.5, 3600, 86400)]
    result = compare(truth, "def waited(seconds):\n    return float(seconds)\n", context=context, inputs=inputs,
                     min_valid=4, n_inputs=4, input_timeout=0.5)
    assert [out["return"] for out in outputs(result)] == [{"float": "0.0"}, {"float": "0.5"}, {"float": "3600.0"},
                                                           {"float": "86400.0"}]
    assert result.candidates[0].matches == (True, True, True, True)


def test_a_search_over_a_sleeping_function_still_finds_its_inputs():
    # The search's own time budget must not run on the frozen clock that the code under test advances.
    context = "import time\n\n"
    truth = "def backoff(attempt):\n    time.sleep(attempt)\n    return attempt * 2\n"
    result = compare(truth, truth, context=context)
    assert result.valid_inputs >= 8, result.reason
    assert result.conclusive


def test_output_that_differs_between_processes_is_invalid_as_nondeterministic():
    # a new random UUID on every read, so never the same in the replay's fresh process (/proc/uptime, read here
    # before, ticks every 10 ms: an input replayed within the tick of its search run gave the same output, and
    # once, in a loaded CI run, every input did, so none was flagged)
    truth = ('def tag(name):\n    with open("/proc/sys/kernel/random/uuid") as fh:\n'
             '        return name + ":" + fh.read()\n')
    result = compare(truth, truth)
    flagged = [i for i in result.inputs if i.reason == "nondeterministic"]
    assert flagged, (result.reason, [(i.status, i.reason, i.output) for i in result.inputs])
    assert all(not i.valid and i.status == "invalid" for i in flagged)
    assert all(result.candidates[0].matches[i.index] is None for i in flagged)  # not counted as non-matches


# --- generators and coroutines -------------------------------------------------------------------------

CHUNKS = "def chunks(items, size):\n    for i in range(0, len(items), size):\n        yield items[i:i + size]\n"


def test_a_generator_is_run_to_completion_and_its_items_are_the_output():
    yield_from = "def chunks(items, size):\n    yield from (items[i:i + size] for i in range(0, len(items), size))\n"
    as_list = "def chunks(items, size):\n    return [items[i:i + size] for i in range(0, len(items), size)]\n"
    result = compare(CHUNKS, yield_from, as_list)
    assert result.conclusive, result.reason
    returned = [out["return"] for out in outputs(result) if "return" in out]
    assert returned and all(list(r) == ["generator"] for r in returned)  # the items, in order
    assert sims(result)[0] == 1.0
    assert result.candidates[1].matches == where(result, raised)  # a list is not a generator


def test_an_async_function_is_awaited():
    truth = "async def total(values):\n    s = 0\n    for v in values:\n        s += v\n    return s\n"
    same = "async def total(values):\n    return sum(values)\n"
    off = "async def total(values):\n    return sum(values) + 1\n"
    result = compare(truth, same, off)
    assert result.conclusive, result.reason
    assert sims(result)[0] == 1.0
    assert result.candidates[1].matches == where(result, raised)


def test_an_async_function_that_awaits_asyncio_sleep_finishes():
    # asyncio's event loop reads the clock the harness froze; a sleep must still end.
    context = "import asyncio\n\n"
    truth = "async def total(values):\n    await asyncio.sleep(0.01)\n    return sum(values)\n"
    result = compare(truth, truth, context=context, input_timeout=0.3, budget_runs=8, n_inputs=8)
    assert [i.reason for i in result.inputs if not i.valid] == []
    assert result.conclusive, result.reason
    assert sims(result) == [1.0]


# --- what is not a result ------------------------------------------------------------------------------


def test_an_unparsable_candidate_matches_no_valid_input():
    result = compare(SCORE, "def score(n, bonus=0:\n    return n\n", context=SCORE_CONTEXT)
    assert result.conclusive, result.reason
    bad = result.candidates[0]
    assert bad.outcome == "unparsable"
    assert "does not parse" in bad.message
    assert bad.matches == (False,) * 10
    assert bad.sim_func == 0.0


def test_a_truth_with_one_output_is_inconclusive_and_never_a_non_match():
    truth = "def version(x):\n    return 42\n"
    result = compare(truth, truth, "def version(x):\n    return 41\n")
    assert not result.conclusive
    assert "distinct_outputs 1 < 2" in result.reason
    assert result.distinct_outputs == 1 and result.valid_inputs == 10
    assert sims(result) == [None, None]
    assert result.candidates[0].matches == (True,) * 10  # the per-input facts are still reported
    rows = execution_rows("s1", result, ["target", "reference"])
    assert rows["conclusive"].to_list() == [False, False]
    assert rows["sim_func"].to_list() == [None, None]
    assert rows["reason"][0] == result.reason


def test_an_input_that_never_finishes_is_invalid_with_reason_timeout():
    truth = "def spin(n):\n    while n < 0:\n        pass\n    return n + 1\n"
    inputs = [{"args": {"n": "1"}}, {"args": {"n": "-1"}}, {"args": {"n": "2"}}]
    result = compare(truth, truth, inputs=inputs, input_timeout=0.3, n_inputs=3, min_valid=2)
    assert [i.valid for i in result.inputs] == [True, False, True]
    assert result.inputs[1].status == "invalid"
    assert result.inputs[1].reason == "timeout"
    assert result.candidates[0].matches == (True, None, True)


# --- determinism ----------------------------------------------------------------------------------------


def test_the_same_seed_chooses_the_same_inputs():
    first = compare(WITHDRAW, context=ACCOUNT, seed=7)
    again = compare(WITHDRAW, context=ACCOUNT, seed=7)
    assert [i.to_dict() for i in first.inputs] == [i.to_dict() for i in again.inputs]
    assert [i.output for i in first.inputs] == [i.output for i in again.inputs]
    assert len(first.inputs) == 10
