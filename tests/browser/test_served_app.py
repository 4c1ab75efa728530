"""The app as a person sees it: served by `streamlit run`, driven in headless Chromium."""
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from core import settings
from tests.helpers import smoke_record

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed (apt-get install chromium)"),
]
WAIT_MS = 180_000  # generous: a loaded 2-core machine renders slowly; this waits, it does not time
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-dev.txt")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict):
    """`streamlit run` on a free loopback port with `env`; yields its URL once healthy, stops it after."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=settings.APP_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # streamlit waits for open sessions; the test is over
            server.kill()
            server.wait()


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("streamlit did not come up within 120 s")


@pytest.fixture
def serve(results_dir):
    """Start `streamlit run` on a free loopback port with a smoke matmul record (run once a session, by
    tests.helpers.smoke_record); yields a URL maker."""
    smoke_record("matmul")
    with contextlib.ExitStack() as servers:
        yield lambda **env: servers.enter_context(streamlit_server(os.environ | env))


@pytest.fixture
def page():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"])
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


def test_navigate_to_matmul_and_see_its_charts(serve, page, tmp_path):
    page.goto(serve())
    page.get_by_role("heading", name="Crossover").wait_for(timeout=WAIT_MS)
    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Matrix multiply and transfers").click()
    page.get_by_text("The write-up's claim.").wait_for(timeout=WAIT_MS)
    page.locator(".vega-embed").nth(2).wait_for(timeout=WAIT_MS)
    assert page.locator(".vega-embed").count() >= 3
    page.get_by_role("button", name="Run", exact=True).wait_for(timeout=WAIT_MS)
    page.screenshot(path=os.environ.get("CROSSOVER_SCREENSHOT", tmp_path / "matmul.png"), full_page=True)
