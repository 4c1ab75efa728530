"""The read-only view, page by page through the router, over the small results kept for the tests (each experiment's
charts and verdicts drawn): no error on any page; the app speaks of "this server" (the visitor is not on the machine
that measured), shows none of the server's paths and no rerun heading. Every string a page sends is read, in collapsed
expanders and chart specifications too. The browser's look at the same view, and its deep link, is
tests/browser/test_read_only_browser.py."""
import re
import shutil

import pytest
from google.protobuf.json_format import MessageToDict

from core import experiments, settings
from tests.app.test_every_page import SMALL_RESULTS
from tests.helpers import render

PAGES = ["overview", "your_model", *experiments.registry(), "machines", "compare", "predictions"]
RERUN_HEADING = re.compile(r"rerun|run it again", re.IGNORECASE)
HEADINGS = ("title", "header", "subheader")

pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def read_only_app(tmp_path_factory):
    """The router over a copy of the small results, read-only: every page of the module switches to its page on it."""
    folder = tmp_path_factory.mktemp("read-only") / "results"
    shutil.copytree(SMALL_RESULTS, folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.RESULTS_ENV, str(folder))
        patch.setenv(settings.READ_ONLY_ENV, "1")
        yield render("streamlit_app.py"), str(folder)


@pytest.mark.parametrize("name", PAGES)
def test_every_page_of_the_read_only_view_speaks_of_this_server_and_shows_no_path(read_only_app, name, monkeypatch):
    at, folder = read_only_app
    monkeypatch.setenv(settings.RESULTS_ENV, folder)
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, at.exception
    assert at.title, f"{name} shows no title"
    text = "\n".join([*strings(at.main), *strings(at.sidebar)])
    assert not [m.group(0) for m in re.finditer(r".{0,60}this machine.{0,40}", text, re.IGNORECASE)]
    assert folder not in text, "the results folder's path is shown"
    assert "Devices on this server" in "\n".join(strings(at.sidebar))
    assert not [h.value for kind in HEADINGS for h in at.get(kind) if RERUN_HEADING.search(h.value)]
    assert not at.error, [e.value for e in at.error]
    assert not [b.label for b in at.button if b.label == "Run"]


def strings(block) -> list[str]:
    """Every string of every element and block in `block` (a collapsed expander's contents and label included)."""
    found, stack = [], [block]
    while stack:
        node = stack.pop()
        stack.extend(getattr(node, "children", {}).values())
        proto = getattr(node, "proto", None)
        if proto is not None:
            found.extend(_strings(MessageToDict(proto)))
    return found


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
