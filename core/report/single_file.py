"""The single-file report: one self-contained HTML file that opens offline in any browser (a CI artifact, an
email), built from the results folder: the verdict matrix, every experiment's charts with the runs behind
them, the machines and their fingerprints, and where every figure comes from.

Vega, Vega-Lite and vega-embed are inlined once (vl-convert's bundle), each chart's Vega-Lite spec with its data
after them: the file fetches nothing. Text from records, about.md and the published figures goes through
markdown-it with raw HTML off, so a record can never inject markup."""
import html
import json
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

from core import experiments, published, versions
from core.present import analysis
from core.report import machines, overview
from core.model import profiles
from core.store import files, results, runs
from core.predict import writeups
from core.present.charts import ratio_dots
from core.params import ConfigError

# Plain symbols, not emoji: a browser without an emoji font (a CI runner's) still shows them.
MARKS = {analysis.REPRODUCED: "✓", analysis.NOT_REPRODUCED: "✗", analysis.TOO_CLOSE: "±", analysis.ESTIMATED: "≈",
         analysis.NEEDS_GPU: "…", analysis.NO_DATA: "?"}
COMPOSED = ("facet", "hconcat", "vconcat", "concat", "repeat")  # a spec whose parts carry their own widths
PROVENANCE = ("Every figure is **measured** (a record in the results folder: its run, machine and code are named "
              "under each chart; solid marks), **published** (the write-up's own figure, its source cited; hollow "
              "marks) or **predicted** (the cost model's figure from a census of the workload, never a measurement; "
              "dotted marks).")
STYLE = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#1f2430;line-height:1.45}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}th,td{border:1px solid #d0d4dc;
padding:.3em .5em;vertical-align:top;text-align:left}th{background:#f2f4f8}.note{background:#fff6e0;border-left:4px solid
#f0a500;padding:.5em 1em}.provenance{color:#555;font-size:.85em}.chart{margin:1em 0;width:100%}h2{border-bottom:1px solid #ddd;
padding-bottom:.2em;margin-top:2em}blockquote{border-left:4px solid #ccd;margin:0;padding:.2em 1em;color:#333}"""
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


@dataclass(frozen=True)
class Written:
    path: Path
    bytes: int
    seconds: float

    def text(self) -> str:
        return f"wrote {self.path}: {self.bytes / 1e6:.2f} MB in {self.seconds:.1f} s; it opens offline in any browser"


def write(path: Path) -> Written:
    """Build the report and write it to `path` through a temporary file renamed into place. ConfigError
    naming --output when it cannot be written there."""
    started = time.perf_counter()
    target = Path(path)
    if target.is_dir():
        raise ConfigError("--output", f"{target} is a folder; name the HTML file to write")
    if not target.parent.is_dir():
        raise ConfigError("--output", f"{target.parent} is not a folder")
    document = build().encode()
    try:
        files.replace_atomic(target, document)
    except OSError as e:
        raise ConfigError("--output", f"cannot write {target}: {e.strerror or e}") from None
    return Written(target, len(document), time.perf_counter() - started)


def build() -> str:
    """The whole report as one HTML document."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the loaders skip is not in the report; the app's pages say why
        records, calibrated = results.load_records(), profiles.all()
    charts: list[dict] = []
    body = [_header(records), _headline(records, charts), _matrix(records)]
    body += [_experiment(exp, records, charts) for exp in experiments.registry().values()]
    body.append(_machines(records, calibrated))
    return _document("\n".join(body), charts)


def _document(body: str, charts: list[dict]) -> str:
    embeds = "\n".join(f"vegaEmbed('#chart-{i}', {_script_json(spec)}, {{actions: false, renderer: 'svg'}})"
                       f".catch(e => document.getElementById('chart-{i}').textContent = 'This chart failed: ' + e);"
                       for i, spec in enumerate(charts))
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Crossover report</title>"
            f"<style>{STYLE}</style>\n<script>{_script_text(_javascript())}</script></head>\n<body>\n{body}\n"
            f"<script>\n{embeds}\n</script>\n</body></html>\n")


@lru_cache(maxsize=1)
def _javascript() -> str:
    """vega, vega-lite and vega-embed, bundled with their dependencies (about 0.9 MB), as globals."""
    import vl_convert  # only the report needs it: the CLI's other commands run where it is not installed
    return vl_convert.javascript_bundle()


def _script_text(code: str) -> str:
    """JavaScript safe inside <script>: no '</script' can end it early."""
    return code.replace("</script", "<\\/script")


def _script_json(spec: dict) -> str:
    """A spec as a JavaScript literal inside <script>: '<' escaped, so no text in the data can close the tag."""
    return json.dumps(spec).replace("<", "\\u003c")


def _md(text: str) -> str:
    return _MARKDOWN.render(str(text))


def _md_inline(text: str) -> str:
    return _MARKDOWN.renderInline(str(text))


def _table(frame: pd.DataFrame) -> str:
    """A frame as an HTML table, each cell's text rendered as inline Markdown (raw HTML escaped)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_md_inline('' if pd.isna(v) else v)}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _chart(chart, charts: list[dict], runs_shown: str = "") -> str:
    """A placeholder the chart is drawn into, and the runs it shows; the chart fills the page's width, as in
    the app (where Streamlit sets it)."""
    spec = chart.to_dict()
    if spec.get("width") is None and not any(key in spec for key in COMPOSED):
        spec["width"] = "container"
    charts.append(spec)
    provenance = f"<p class=\"provenance\">{_md_inline(runs_shown)}</p>" if runs_shown else ""
    return f"<div class=\"chart\" id=\"chart-{len(charts) - 1}\"></div>{provenance}"


def _header(records: list[dict]) -> str:
    made_by = versions.code_text(versions.code_version())
    machine_count = len({r["machine_id"] for r in records})
    notice = ("" if overview.gpu_measured(records) else
              "<p class=\"note\">No GPU has measured anything yet: every GPU figure here is published or predicted.</p>")
    return (f"<h1>Crossover: will a GPU make a small PyTorch model faster?</h1>"
            f"<p>Built {html.escape(results.now())} (UTC) by Crossover {html.escape(made_by)} from {len(records)} "
            f"run{'s' * (len(records) != 1)} on {machine_count} machine{'s' * (machine_count != 1)}.</p>"
            f"{notice}{_md(PROVENANCE)}")


def _headline(records: list[dict], charts: list[dict]) -> str:
    headline = overview.headline(records, writeups.latest())
    if headline.empty:
        return ""
    chart = ratio_dots(headline, title="CPU time / GPU time, one row per write-up configuration",
                       x_title="CPU time / GPU time (above 1: the GPU is faster; log scale)",
                       tooltip=["experiment", "setting", "hardware", "detail"])
    return ("<h2>GPU/CPU speedup at the write-ups' configurations</h2>"
            + _chart(chart, charts, "Published: the write-up's own figure, on its hardware. Predicted: the cost "
                                    "model's figure for the write-up's hardware, not a measurement; its bar, where "
                                    "one is drawn, the range the model's error on speedups gives it. Measured: a GPU's "
                                    "time against its machine's CPU, where a GPU machine's records are present."))


def _matrix(records: list[dict]) -> str:
    matrix = overview.verdict_matrix(records)
    table = overview.matrix_table(matrix, MARKS, MARKS[analysis.NO_DATA])
    legend = " · ".join(f"{mark} {outcome}" for outcome, mark in MARKS.items())
    return (f"<h2>The claims, checked on each machine</h2>{_table(table)}<p class=\"provenance\">{html.escape(legend)}. "
            "Each machine's column rests on the latest complete run of each preset there; a predicted column is the "
            "cost model's answer for the write-up's GPU, not a measurement.</p>")


def _experiment(exp, records: list[dict], charts: list[dict]) -> str:
    rows = results.rows_frame(records, exp.name)
    shown = runs.select(rows, runs.default_runs(rows))
    figures = published.load(exp.name)
    about = exp.about(shown)
    parts = [f"<h2>{html.escape(exp.title)}</h2>", f"<blockquote>{_md(about['Claim'])}</blockquote>",
             f"<p class=\"provenance\">Source: {_md_inline(published.citation(exp.source))}</p>",
             _verdicts(exp.verdicts(shown, figures))]
    if shown.empty:
        parts.append("<p>No complete run of this experiment in the results folder.</p>")
    else:
        parts += [_chart(chart, charts, _runs_text(shown)) for chart in exp.charts(shown, figures)]
    return "\n".join(parts)


def _verdicts(found: list) -> str:
    table = pd.DataFrame([{"Claim": v.claim, "Published": v.published or "—",
                           "Verdict": f"{MARKS.get(v.outcome, '')} **{v.outcome}**"
                                      + (f" (rests on {'measurements' if v.basis == 'measured' else 'an estimate'})"
                                         if v.basis else ""),
                           "Figure decided on (95% CI)": v.interval or "—",
                           "What we found": v.finding or v.evidence} for v in found])
    return _table(table) if len(table) else ""


def _runs_text(shown: pd.DataFrame) -> str:
    """The runs a chart shows, each with its machine, preset, status, start and code."""
    codes = shown.drop_duplicates("run_id").set_index("run_id")["code_version"]
    described = [f"run {run['run_id']} ({runs.label(run)}; code {str(codes.get(run['run_id']) or 'unknown')[:10]})"
                 for _, run in runs.runs_of(shown).iterrows()]
    return ("Measured points: " + "; ".join(described) + ". Published points: the source above."
            if described else "")


def _machines(records: list[dict], calibrated: dict[str, dict]) -> str:
    found = machines.fingerprints(records, calibrated)
    if not found:
        return "<h2>Machines</h2><p>No machine has results yet.</p>"
    table = machines.table(found)
    table["calibrated"] = [calibrated[m]["taken"] if m in calibrated else "no" for m in table["machine id"]]
    runs_table = overview.machines_table(records).drop(columns="machine_id")
    return f"<h2>Machines</h2>{_table(table)}<h3>Their runs</h3>{_table(runs_table)}"
