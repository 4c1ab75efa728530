"""Every page renders from a small results folder kept for the tests (tests/data/results: the latest quick run of each
experiment on one 2-core VM, its censuses cut to their counts, its breakdowns to their parts and its stand-in censuses
left out), each experiment page with its charts and verdicts. The default tier's look at every page; the full tier
renders them from the shipped results as well (test_app)."""
import shutil

import pytest

from core import experiments, settings
from tests.helpers import render

PAGES = sorted((settings.APP_ROOT / "pages").glob("*.py"))
SMALL_RESULTS = settings.APP_ROOT / "tests" / "data" / "results"


@pytest.fixture
def small_results(results_dir, monkeypatch):
    shutil.copytree(SMALL_RESULTS, results_dir)  # a copy: a page may sweep or write beside what it reads
    return results_dir


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_page_renders_from_the_small_results(page, small_results):
    at = render(f"pages/{page.name}")
    assert not at.exception
    assert at.title, f"{page.stem} shows no title"
    if page.stem in experiments.registry():
        assert at.get("vega_lite_chart"), f"{page.stem} shows no chart from its run"
        assert any(m.value.startswith("| Claim |") for m in at.markdown), f"{page.stem} shows no verdicts"
