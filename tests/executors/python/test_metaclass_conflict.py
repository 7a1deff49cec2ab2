"""A class whose metaclass conflicts with a withheld base's (issue 24 §2).

cliff's ``class DisplayCommandBase(command.Command, metaclass=abc.ABCMeta)``, with ``cliff.command`` withheld:
the stand-in base's metaclass and ``ABCMeta`` conflict (``TypeError: metaclass conflict``), and the class was
rebuilt without its bases, so ``super().get_parser(prog_name)`` raised ``AttributeError`` on every input
(``Lister.get_parser`` 0.14 and ``DisplayCommandBase.get_parser`` 0.08 on the third package list's seeds 1-5,
1.00 each now). The class is now built with its bases and without its keywords first.
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "import abc\n"
    "from cliff import command\n"
    "\n"
    "class Base(command.Command, metaclass=abc.ABCMeta):\n"
    "    @abc.abstractmethod\n"
    "    def produce(self):\n"
    "        pass\n"
    "\n"
)
X = (
    "    def get_parser(self, prog_name):\n"
    "        parser = super(Base, self).get_parser(prog_name)\n"
    "        group = parser.add_argument_group(title='output')\n"
    "        if prog_name:\n"
    "            group.add_argument('-f')\n"
    "        return prog_name\n"
)


@needs_bwrap
def test_super_reaches_a_withheld_base_despite_a_metaclass_conflict() -> None:
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(ex.compare(X, [], context=CONTEXT))
    finally:
        ex.close()
    # before: coverage 0.20, one output (AttributeError: the rebuilt class had no base to reach)
    assert result.conclusive and result.coverage == 1.0, result.reason
    assert any("built without its keywords (its metaclass conflicts with a withheld base's)" in w
               for w in result.warnings)
    assert all('"cliff.command.Command.get_parser"' in i.output for i in result.inputs if i.valid)
