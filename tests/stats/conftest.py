"""Keep the large validity runs (``@pytest.mark.validity_large``, 10^5+ replicates) out of ordinary runs.

They run only when asked for: ``pytest -m validity_large tests/stats`` or ``CALIB_VALIDITY_LARGE=1``
(docs/statistics.md, "Validity suite"). Nothing else in the test suite is affected.
"""

from __future__ import annotations

import os

import pytest


def _large_requested(config: pytest.Config) -> bool:
    expr = (config.getoption("markexpr", "") or "").replace(" ", "")
    asked = "validity_large" in expr and "notvalidity_large" not in expr
    return asked or os.environ.get("CALIB_VALIDITY_LARGE") == "1"


@pytest.fixture(autouse=True)
def _skip_large_validity_runs(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("validity_large") and not _large_requested(request.config):
        pytest.skip("large validity run: select it with -m validity_large or CALIB_VALIDITY_LARGE=1")
