"""Scale-aware diagnostics: perturbation probes, I/O isomorphisms, opcode divergence, CoDeC (docs/probes.md).

The pieces a ``probes`` study (:mod:`calib.study.probes`) is built from, each usable alone: tasks with
tests (:mod:`calib.probes.tasks`) and their sandboxed test runs (:mod:`calib.probes.testrun`), the
bijections and rewritten tests of the isomorphisms (:mod:`calib.probes.transforms`,
:mod:`calib.probes.isomorphism`), synonym fuzzing and dead code (:mod:`calib.probes.perturb`), opcode
profiles (:mod:`calib.probes.opcodes`), CoDeC (:mod:`calib.probes.codec`) and the prompts of a study
(:mod:`calib.probes.prompting`).
"""

from calib.probes.codec import CodecSample, CodecScore, codec_auc, codec_probe, codec_score
from calib.probes.deadcode import dead_code
from calib.probes.isomorphism import contract_text, metamorphic_check, rewrite_tests, transformed_reference
from calib.probes.opcodes import opcode_entropy, opcode_histogram, opcode_jsd
from calib.probes.perturb import synonym_fuzz
from calib.probes.tasks import Task, TaskSet, load_tasks
from calib.probes.testrun import TestRun, run_tests
from calib.probes.transforms import Affine, BaseDigits, Bijection, Cubic, NotInDomain, make_bijection

__all__ = ["Affine", "BaseDigits", "Bijection", "CodecSample", "CodecScore", "Cubic", "NotInDomain", "Task", "TaskSet",
           "TestRun", "codec_auc", "codec_probe", "codec_score", "contract_text", "dead_code", "load_tasks",
           "make_bijection", "metamorphic_check", "opcode_entropy", "opcode_histogram", "opcode_jsd", "rewrite_tests",
           "run_tests", "synonym_fuzz", "transformed_reference"]
