"""How fast the served app renders its pages, and how much memory the server keeps, measured as a visitor sees it.

Serves a checkout with `streamlit run` over a copy of its results (optionally padded with synthetic matmul runs)
and drives it with headless Chromium (playwright, the system /usr/bin/chromium). A page counts as rendered once
its script has finished (the app's script state `notRunning`, no running indicator in the status widget) and
the main block holds its heading. Prints one line per figure; `--json FILE` also writes them as JSON.

    .venv/bin/python benchmarks/page_timings.py --app /path/to/checkout [--extra-records 300] [--json out.json]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import psutil
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
MACHINE = "amd-epyc-28e20464"  # whose newest matmul record the synthetic records copy
READERS = {"overview": "", "matmul": "matmul", "cnn": "cnn", "iris": "iris", "machines": "machines",
           "predictions": "predictions"}  # page -> url path (ui/router.py: an experiment's path is its name)
WAIT_MS = 300_000  # a generous ceiling: this waits, it does not time
# Injected into every page: stamps window.__rendered (epoch ms) the first time the page reads as rendered.
RENDERED_JS = """(() => {
  const rendered = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app && app.getAttribute('data-test-script-state') === 'notRunning'
      && !document.querySelector('[data-testid="stStatusWidgetRunningIcon"], [data-testid="stStatusWidgetRunningManIcon"]')
      && document.querySelector('[data-testid="stMain"] h1');
  };
  const timer = setInterval(() => { if (rendered()) { window.__rendered = Date.now(); clearInterval(timer); } }, 20);
})();"""
ERRORS = "[data-testid='stException'], [data-testid='stAlertContentError']"


def results_copy(app: Path, extra: int) -> Path:
    """DIR/results copied to a temporary folder, plus `extra` copies of MACHINE's newest matmul record, each
    with a fresh run id (core.results.new_run_id's form) and a later start."""
    folder = Path(tempfile.mkdtemp(prefix="crossover-bench-")) / "results"
    shutil.copytree(app / "results", folder)
    if extra:
        machine = folder / MACHINE
        records = [json.loads(p.read_text()) for p in machine.glob("matmul-*.json")]
        newest = max(records, key=lambda r: r["started"])
        started, ended = (datetime.fromisoformat(newest[k]) for k in ("started", "ended"))
        for i in range(1, extra + 1):
            shift = timedelta(minutes=i)
            run_id = f"matmul-{(started + shift).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
            record = newest | {"run_id": run_id, "started": (started + shift).isoformat(),
                               "ended": (ended + shift).isoformat()}
            (machine / f"{run_id}.json").write_text(json.dumps(record, indent=1))
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app: Path, results: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = os.environ | {"CROSSOVER_RESULTS_DIR": str(results)}
    env.pop("CROSSOVER_READ_ONLY", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1"],
        cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return server, url
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise SystemExit("streamlit did not come up within 120 s")


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def rss_mb(pid: int) -> float:
    """Resident memory of the process and its children, MB."""
    process = psutil.Process(pid)
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return round(total / 2**20, 1)


def rendered_after(page, t0: float) -> float:
    """Seconds from `t0` (time.time()) until the page first read as rendered."""
    page.wait_for_function("window.__rendered", timeout=WAIT_MS, polling=50)
    if page.locator(ERRORS).count():
        print(f"  note: an error element on {page.url}", file=sys.stderr)
    return round(page.evaluate("window.__rendered") / 1000 - t0, 3)


def open_page(page, url: str) -> float:
    t0 = time.time()
    page.goto(url, wait_until="commit")
    return rendered_after(page, t0)


def reload_page(page) -> float:
    t0 = time.time()
    page.reload(wait_until="commit")
    return rendered_after(page, t0)


def new_context(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(RENDERED_JS)
    return context


def measure(app: Path, extra: int) -> dict:
    results = results_copy(app, extra)
    figures = {"app": str(app), "extra_records": extra,
               "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    server, url = start_server(app, results)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows"])
            context = new_context(browser)
            page = context.new_page()
            figures["overview_cold_s"] = open_page(page, url)
            figures["overview_warm_runs_s"] = [reload_page(page) for _ in range(3)]
            figures["overview_warm_median_s"] = statistics.median(figures["overview_warm_runs_s"])
            open_page(page, f"{url}/matmul")  # its first render, not counted
            figures["matmul_warm_runs_s"] = [reload_page(page) for _ in range(3)]
            figures["matmul_warm_median_s"] = statistics.median(figures["matmul_warm_runs_s"])
            context.close()
            figures["server_rss_before_readers_mb"] = rss_mb(server.pid)

            contexts = {name: new_context(browser) for name in READERS}
            pages = {name: c.new_page() for name, c in contexts.items()}
            t0 = time.time()
            for name, path in READERS.items():  # all six navigations are under way before any is awaited
                pages[name].goto(f"{url}/{path}", wait_until="commit")
            figures["concurrent_readers_s"] = {name: rendered_after(pages[name], t0) for name in READERS}
            for c in contexts.values():
                c.close()
            browser.close()
        time.sleep(10)
        figures["server_rss_10s_after_readers_mb"] = rss_mb(server.pid)
    finally:
        stop(server)
        shutil.rmtree(results.parent, ignore_errors=True)
    figures["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout to serve (default: the repository holding this script)")
    parser.add_argument("--extra-records", type=int, default=0, help="synthetic matmul records to add")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    figures = measure(args.app.resolve(), args.extra_records)
    for key, value in figures.items():
        if isinstance(value, dict):
            for name, seconds in value.items():
                print(f"{key}.{name}: {seconds}")
        else:
            print(f"{key}: {value}")
    print(json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
