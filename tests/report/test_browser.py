"""report.html in a real browser: headless Chromium loads it from disk and the DOM holds every part.

Chromium renders the page without network access of its own (the page loads nothing), and
``--dump-dom`` prints the DOM after parsing, so inline SVG that the HTML parser rejected would be
missing here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from calib.report import write_report
from tests.report._fake_run import make_run

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome", "chrome")
                 if shutil.which(name)), None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium)")


@pytest.fixture(scope="module")
def dom(tmp_path_factory: pytest.TempPathFactory) -> str:
    run = make_run(tmp_path_factory.mktemp("run"), examples=3)
    html = write_report(run)["html"]
    profile = tmp_path_factory.mktemp("chromium-profile")
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", "--dump-dom", Path(html).resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_figures_are_svg_elements(dom):
    # rates, threshold sensitivity, metric agreement (a heat map of vector cells) and ROC: all inline SVG
    assert len(re.findall(r"<svg\b", dom)) == 4
    assert 'id="figure-rates"' in dom and 'id="figure-roc"' in dom
    assert 'id="figure-sensitivity"' in dom and 'id="figure-agreement"' in dom
    assert re.search(r'<figure id="figure-rates"><svg[^>]*>.*?<path', dom, re.S)


def test_tables_and_examples_are_in_the_dom(dom):
    assert re.search(r'<table id="rates-table">.*?<td>all</td><td>37</td><td>32</td>', dom, re.S)
    assert re.search(r'<table id="proxy-table">.*?<code>judge_functional</code>', dom, re.S)
    assert len(re.findall(r'<section class="example" id="example-s\d\d">', dom)) == 3
    assert '<section class="example" id="example-s00">' in dom
    assert "&lt;tag&gt; &amp;" in dom  # x's code, escaped, not parsed as markup
    assert "<tag>" not in dom
