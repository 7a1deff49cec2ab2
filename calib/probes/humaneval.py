"""HumanEval (Chen et al., 2021, "Evaluating Large Language Models Trained on Code", arXiv:2107.03374) as
probes tasks.

``"humaneval"`` (optionally ``@<commit>``) in :func:`calib.probes.tasks.load_tasks` reads the Parquet file of
the ``openai/openai_humaneval`` dataset repository (MIT licence; 164 problems, one ``test`` split) from the
Hugging Face cache at a pinned revision, and turns each row into the task shape MBPP uses
(docs/probes-tasks.md):

- the statement is the entry point's docstring (the natural language of the problem, without its code);
- the reference solution is the row's ``prompt`` (imports, helper functions, signature and docstring)
  followed by its ``canonical_solution``;
- the tests: HumanEval's ``check(candidate)`` is split into its assert statements, ``candidate`` renamed to
  the entry point, when its body holds nothing but asserts (the form probes rewrite through a bijection);
  otherwise (loops, helpers, random inputs) the whole test module becomes setup code and the one test is
  ``check(<entry point>)``. The test module's imports are setup code either way.
"""

from __future__ import annotations

import ast
import re
from typing import Any

__all__ = ["HUMANEVAL_FILE", "HUMANEVAL_REPO", "HUMANEVAL_REVISION", "humaneval_record", "humaneval_revision"]

HUMANEVAL_REPO = "openai/openai_humaneval"
# main of the dataset repository as last modified (2024-01-04), the revision other evaluation code pins for
# its Parquet file; pin another with "humaneval@<commit>" (the repository's History page lists them).
HUMANEVAL_REVISION = "7dce6050a7d6d172f3cc5c32aa97f52fa1a2e544"
#: The repository's one data file.
HUMANEVAL_FILE = "openai_humaneval/test-00000-of-00001.parquet"
_SPEC = re.compile(r"^humaneval(?:@(?P<revision>.*))?$")


def humaneval_revision(source: str) -> str | None:
    """The revision ``source`` asks for (``humaneval`` -> the pinned one), or None when it names no HumanEval."""
    match = _SPEC.match(source)
    if match is None:
        return None
    return match["revision"] if match["revision"] is not None else HUMANEVAL_REVISION


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:  # noqa: N802 - ast's visitor naming
        return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node) if node.id == self.old else node


def _statement(code_tree: ast.Module, entry_point: str) -> str | None:
    for node in code_tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            doc = ast.get_docstring(node)
            return doc.strip() if doc and doc.strip() else None
    return None


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _tests(test_tree: ast.Module, entry_point: str, test_source: str) -> tuple[list[str], str]:
    """``(tests, setup)`` from HumanEval's test module."""
    imports = [ast.unparse(n) for n in test_tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    check = next((n for n in test_tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    others = [n for n in test_tree.body if n is not check and not isinstance(n, (ast.Import, ast.ImportFrom))
              and not (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["METADATA"])
              and not _is_docstring(n)]
    if check is not None and len(check.args.args) == 1 and not others:
        parameter = check.args.args[0].arg
        body = [n for n in check.body if not _is_docstring(n)]
        if body and all(isinstance(n, ast.Assert) for n in body):
            rename = _Rename(parameter, entry_point)
            return [ast.unparse(rename.visit(n)) for n in body], "\n".join(imports)
    return [f"check({entry_point})"], test_source.strip("\n")


def humaneval_record(row: dict[str, Any]) -> dict[str, Any]:
    """A HumanEval row (``task_id, prompt, canonical_solution, test, entry_point``) as a task record.

    Raises ValueError (one line naming the column and the problem) when the row cannot become a task.
    """
    for key in ("task_id", "prompt", "canonical_solution", "test", "entry_point"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(f"column {key!r} is missing or empty")
    entry_point = row["entry_point"]
    try:
        code_tree = ast.parse(row["prompt"] + row["canonical_solution"])
        test_tree = ast.parse(row["test"])
    except SyntaxError as exc:
        raise ValueError(f"the prompt with its solution, or the test, does not parse (line {exc.lineno}: "
                         f"{exc.msg})") from exc
    statement = _statement(code_tree, entry_point)
    if statement is None:
        raise ValueError(f"the prompt's {entry_point}() has no docstring to state the problem")
    tests, setup = _tests(test_tree, entry_point, row["test"])
    return {"task_id": row["task_id"], "prompt": statement, "code": row["prompt"] + row["canonical_solution"],
            "entry_point": entry_point, "test_list": tests, "setup": setup}
