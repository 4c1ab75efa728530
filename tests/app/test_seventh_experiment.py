"""The proof that a seventh experiment is cheap: one package (declaration, analysis, charts, prose) and a
two-line page, and it runs through the CLI and renders through the shared template."""
import json
import subprocess
import sys
import textwrap

import pytest
from streamlit.testing.v1 import AppTest

from core import experiments, settings
from core.store import results
from tests.helpers import render

PACKAGE = {
    "__init__.py": '''
        import torch
        from core.measure import timing
        from core.measure.experiment import Point, Variant
        from core.params import Param
        from core.present.presented import Presented

        from . import analysis, charts

        class Fake(Presented):
            name, title, source = "fake", "A seventh experiment", "none.txt"
            params = (Param("sizes", int, (4, 8), "vector sizes", low=1, high=1000, many=True),)
            variants = (Variant("sum", "torch.sum of a vector"),)

            def points(self, config, device):
                return [Point(device, "sum", {"size": n}) for n in config["sizes"]]

            def workload(self, point, config, run):
                x = torch.ones(point.params["size"], device=point.device)
                return timing.Workload(lambda: x.sum(), unit="sum", repeats=3, finish=lambda m: {"total": float(x.sum())})

        EXPERIMENT = Fake().bind(analysis, charts)
    ''',
    "analysis.py": '''
        from core.present import analysis
        from core.present.analysis import Claim, Finding

        def faster(rows, figures):
            found = analysis.require(analysis.speedups(rows), rows)
            return Finding(found["speedup"].median() > 1, "summed")

        CLAIMS = [Claim("Summing is faster on a GPU", faster)]
        TABLES = {"Totals": lambda rows: rows[["size", "total"]]}
    ''',
    "charts.py": '''
        from core.present.charts import measured_lines

        def charts(rows, published):
            return [measured_lines(rows, "size", "median_s", title="Sum", x_title="size", y_title="s per sum")]
    ''',
    "about.md": "## Claim\n\nSums are cheap.\n\n## Measured\n\nOne sum.\n\n## Why\n\nBecause.\n",
}
PAGE = 'from ui.template import experiment_page\n\nexperiment_page("fake")\n'


@pytest.fixture
def fake_experiment(tmp_path, monkeypatch):
    package = tmp_path / "plugins" / "fake_experiment"
    package.mkdir(parents=True)
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setenv(experiments.EXTRA_ENV, "fake_experiment")
    experiments.reload()
    yield package.parent
    monkeypatch.undo()
    experiments.reload()


@pytest.mark.full
def test_a_seventh_experiment_runs_through_the_cli_and_renders_on_the_template(fake_experiment, tmp_path,
                                                                                 results_dir):
    env = {**dict(__import__("os").environ), "PYTHONPATH": f"{fake_experiment}:{settings.APP_ROOT}"}
    done = subprocess.run([sys.executable, "-m", "core", "run", "fake", "--device", "cpu", "--preset", "smoke"],
                          cwd=settings.APP_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "[2/2] cpu sum size=8: median" in done.stdout and " per sum" in done.stdout
    [record] = results.load_records(results_dir)
    assert record["status"] == "complete" and [r["metrics"]["total"] for r in record["rows"]] == [4.0, 8.0]

    page = tmp_path / "fake_page.py"
    page.write_text(PAGE)
    at = AppTest.from_file(str(page), default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "A seventh experiment"
    text = " ".join(m.value for m in at.markdown)
    assert "Sums are cheap." in text and "needs a GPU to tell" in text and "Because." in text
    assert at.get("vega_lite_chart") and at.get("dataframe")


@pytest.mark.full
def test_an_experiment_without_a_page_is_an_error_on_the_overview(fake_experiment):
    at = render("pages/overview.py")
    assert not at.exception
    assert any("'fake' is registered but has no page" in e.value for e in at.error)


@pytest.mark.full
def test_an_experiment_that_fails_to_load_is_named_on_the_overview(tmp_path, monkeypatch):
    monkeypatch.setenv(experiments.EXTRA_ENV, "no_such_experiment_module")
    experiments.reload()
    try:
        at = render("pages/overview.py")
        assert any("no_such_experiment_module" in e.value and "could not be loaded" in e.value for e in at.error)
    finally:
        monkeypatch.undo()
        experiments.reload()


def test_every_experiment_page_is_the_two_line_template_call():
    for name in experiments.registry():
        lines = [line for line in (settings.APP_ROOT / "pages" / f"{name}.py").read_text().splitlines() if line]
        assert lines == ["from ui.template import experiment_page", f'experiment_page("{name}")'], name
    assert not experiments.broken(), json.dumps(experiments.broken())
