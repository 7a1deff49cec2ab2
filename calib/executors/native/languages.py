"""The native languages calib compiles and runs, by name: each language's ``LANGUAGE`` record.

A new language is a module beside these (signature parser, call glue, toolchain, build and run commands,
its harness templates under ``harness/<name>/``) and one line here; docs/native-executors.md.
"""

from __future__ import annotations

from calib.executors.native import c, cpp, go, java, rust
from calib.executors.native.language import HARNESS_ROOT, Language, Tools

__all__ = ["HARNESS_ROOT", "LANGUAGES", "Language", "Tools"]

LANGUAGES: dict[str, Language] = {module.LANGUAGE.name: module.LANGUAGE for module in (c, rust, java, cpp, go)}
