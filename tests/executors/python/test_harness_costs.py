"""What the harness does per batch and per run costs no more than it must (issue 24 §3).

Inside the sandbox an audit hook (:func:`.env.install_policy`) is called for every audited event, and
``id()`` is one: ``copy.deepcopy`` of x's tree and the canonical form's cycle check called it once per
node. The tree is copied by :func:`.trees.clone` and cycles are found by ``object.__hash__`` now; the
results are the same (the benchmark's 100 functions gave byte-identical comparisons)."""

from __future__ import annotations

import ast
import copy
import inspect
import subprocess
import sys
import textwrap

from calib.executors.sandbox.harness import canon, trees


def test_clone_copies_a_tree_as_deepcopy_does() -> None:
    tree = ast.parse(inspect.getsource(canon))
    made = trees.clone(tree)
    assert ast.dump(made, include_attributes=True) == ast.dump(copy.deepcopy(tree), include_attributes=True)
    originals = {id(n) for n in ast.walk(tree)}
    assert not any(id(n) in originals for n in ast.walk(made))  # no node shared
    first = next(n for n in made.body if isinstance(n, ast.FunctionDef))
    first.body.clear()  # changing the copy leaves the original as it was
    assert next(n for n in tree.body if isinstance(n, ast.FunctionDef)).body
    assert compile(trees.clone(tree), "<clone>", "exec").co_code == compile(tree, "<clone>", "exec").co_code


def test_canonical_forms_call_no_audited_id() -> None:
    script = textwrap.dedent("""
        import sys
        from calib.executors.sandbox.harness import canon
        events = []
        sys.addaudithook(lambda event, args: events.append(event) if event == "builtins.id" else None)
        loop = [1, {"a": (2, 3)}]
        loop.append(loop)
        shared = [4]
        form = canon.canonical({"loop": loop, "twice": [shared, shared], "deep": [[[["x"]]]]})
        print(len(events), canon.dumps(form))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    count, form = done.stdout.split(" ", 1)
    assert count == "0"  # (12 before: one per container visited)
    # the same form as before: the cycle marked where it closes, a shared (not cyclic) list shown twice
    assert '{"cycle":"list"}' in form and form.count("[4]") == 2
