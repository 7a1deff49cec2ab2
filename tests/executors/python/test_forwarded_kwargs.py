"""x's ``**kwargs`` handed on to a base's ``__init__`` gets the keys that base needs (issue 24 §2).

mako's tag classes build themselves with ``super().__init__(keyword, attributes, ..., **kwargs)``;
``Tag.__init__`` hands its ``**kwargs`` on to ``Node.__init__(self, source, lineno, pos, filename)``. x's own
body never reads ``kwargs``, so the search drew mappings keyed by x's literals (``{'file': ..., 'name': ...}``)
or none at all, and every input failed in ``Node.__init__`` with ``TypeError`` before x's second line:
``NamespaceTag.__init__`` had coverage 0.17 and one distinct output on the second package list's seeds 26-30
(the fifteenth round's tuning sample). Now the mapping's keys are the parameters the call leaves to it,
followed through the bases that hand it on again (``callees._keywords``), and it is conclusive.
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import callees, hints, scaffold
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "class Node:\n"
    "    def __init__(self, source, lineno, pos, filename, strict=False):\n"
    "        self.source = source\n"
    "        self.lineno = lineno\n"
    "        self.pos = pos\n"
    "        self.filename = filename\n"
    "\n"
    "class Tag(Node):\n"
    "    def __init__(self, keyword, attributes, required, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.keyword = keyword\n"
    "        self.attributes = dict(attributes)\n"
    "        missing = [r for r in required if r not in self.attributes]\n"
    "        if missing:\n"
    "            raise ValueError('missing: ' + ','.join(missing))\n"
    "\n"
    "class NamespaceTag(Tag):\n"
)
X = (
    "    def __init__(self, keyword, attributes, **kwargs):\n"
    "        super().__init__(keyword, attributes, (), **kwargs)\n"
    "        self.name = attributes.get('name', 'anon')\n"
    "        if 'name' not in attributes and 'import' not in attributes:\n"
    "            raise KeyError('name or import is required')\n"
    "        if 'file' in attributes and 'module' in attributes:\n"
    "            raise KeyError('only one of file and module')\n"
    "        return None\n"
)


def _kwargs(context: str, function: str) -> hints.Param:
    placed = scaffold.place(context, function)
    info = hints.analyse(placed.node, skip_first=True)
    callees.add_forwarded(info, placed)
    return next(p for p in info.params if p.kind == "kwarg")


def test_the_keys_a_base_needs_are_followed_through_the_bases_that_hand_them_on() -> None:
    kwargs = _kwargs(CONTEXT, X)
    # Tag.__init__ takes keyword, attributes and required by position, and hands the rest on to Node's:
    # its required parameters first, then the one with a default
    assert kwargs.keys == ["source", "lineno", "pos", "filename", "strict"]
    # a call that gives one by name leaves it out
    given = X.replace("(), **kwargs)", "(), pos=0, **kwargs)")
    assert _kwargs(CONTEXT, given).keys == ["source", "lineno", "filename", "strict"]
    # a mapping x only reads itself keeps the keys it reads, and nothing is added where nothing is handed on
    alone = X.replace("super().__init__(keyword, attributes, (), **kwargs)", "self.where = kwargs.get('at')")
    assert _kwargs(CONTEXT, alone).keys == ["at"]


@needs_bwrap
def test_a_constructor_handing_kwargs_to_its_bases_is_conclusive() -> None:
    ex = SandboxExecutor(ExecutorConfig())
    try:
        near = X.replace("'module' in attributes", "'module' not in attributes")
        result = asyncio.run(ex.compare(X, [near], context=CONTEXT))
    finally:
        ex.close()
    # before: every input raised TypeError in Node.__init__ (missing 4 required positional arguments)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8 and result.distinct_outputs >= 2
    assert any('source' in str(i.state) for i in result.inputs)
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0
