"""The chart grammar (core.present.charts), checked on the Vega-Lite specs the charts produce."""
import numpy as np
import pandas as pd
import pytest

from core import experiments, published, settings
from core.present import charts
from core.store import results
from core.measure import timing
from tests.helpers import hand_rows, once


def _layers(spec: dict) -> list[dict]:
    """Every unit layer of a spec (through layers, facets and concatenations)."""
    found = []
    for key in ("layer", "concat", "hconcat", "vconcat"):
        for part in spec.get(key, []):
            found += _layers(part)
    if "spec" in spec:
        found += _layers(spec["spec"])
    if "mark" in spec:
        found.append(spec)
    return found


def _mark(layer: dict) -> dict:
    return layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}


def _encoding(layer: dict, channel: str) -> dict:
    return layer.get("encoding", {}).get(channel, {})


def _rows_of(spec: dict) -> list[dict]:
    """The rows a spec carries (top-level data, as a facet or layer over one frame has it)."""
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def _reference_rules(spec: dict, channel: str) -> list[float]:
    """The values of the rules drawn at a constant across the chart (a reference line) on `channel`."""
    return [_encoding(layer, channel)["datum"] for layer in _layers(spec)
            if _mark(layer)["type"] == "rule" and "datum" in _encoding(layer, channel)]


def _scales(spec: dict, channel: str) -> list[dict]:
    return [_encoding(layer, channel)["scale"] for layer in _layers(spec) if "scale" in _encoding(layer, channel)]


RATIOS = pd.DataFrame({
    "label": ["numpy", "torch resident", "torch resident", "torch copy pageable"],
    "ratio": [1.0, 3.0, 6.0, 1.0],
    "source": ["measured", "measured", "published", "published"],
    "series": ["measured", "measured", "published · K80", "published · K80"],
    "variant": ["numpy", "torch resident", "torch resident", "torch copy pageable"],
})


def _timed(entries: list[dict]) -> pd.DataFrame:
    """Hand-made timed rows of a size sweep (median_s, iqr_s, n, noisy default to a quiet point)."""
    quiet = {"device": "cpu", "variant": "as written", "iqr_s": 0.01, "n": 5, "noisy": False}
    return hand_rows([quiet | e for e in entries], ("size",))


# -- colour -------------------------------------------------------------------------------------------------
def test_every_registered_variant_has_one_fixed_distinct_colour():
    names = {v.name for e in experiments.registry().values() for v in e.variants}
    colours = charts.variant_colours()
    assert set(colours) == names
    assert len(set(colours.values())) == len(names)  # no two variants share a colour
    assert charts.variant_colour("as written") == colours["as written"]
    assert charts.variant_colour("a variant nobody declares") == charts.variant_colour("a variant nobody declares")


def test_a_variant_scale_holds_only_the_variants_drawn_with_their_fixed_colours():
    scale = charts.variant_scale(["tuned", "as written", "tuned"]).to_dict()
    assert scale == {"domain": ["as written", "tuned"],
                     "range": [charts.variant_colour("as written"), charts.variant_colour("tuned")]}


@pytest.fixture(scope="module")
def shipped_specs() -> dict[str, list[dict]]:
    """Every experiment's charts over the results shipped in the repository, as Vega-Lite specs (built once a session,
    shared by the workers of `pytest -n`: 15 to 20 s on a 2-core machine)."""
    def build() -> dict[str, list[dict]]:
        records = results.load_records(settings.APP_ROOT / "results")
        return {name: [chart.to_dict() for chart in experiment.charts(results.rows_frame(records, name),
                                                                      published.load(name))]
                for name, experiment in experiments.registry().items()}
    return once("shipped-chart-specs", build)


def _variant_colours_drawn(spec: dict) -> dict[str, str]:
    """variant -> colour over every colour (or fill) scale of a chart whose field is the variant."""
    found = {}
    for layer in _layers(spec):
        for channel in ("color", "fill"):
            enc = _encoding(layer, channel)
            if enc.get("field") == "variant" and "scale" in enc:
                pairs = dict(zip(enc["scale"]["domain"], enc["scale"]["range"]))
                assert all(found.setdefault(v, c) == c for v, c in pairs.items()), "one chart, two colours"
    return found


@pytest.mark.full
def test_a_variant_has_the_same_colour_in_two_experiments_charts(shipped_specs):
    drawn = {}
    for name in ("cnn", "tabnet", "mlp_surface", "iris"):
        for spec in shipped_specs[name]:
            for variant, colour in _variant_colours_drawn(spec).items():
                drawn.setdefault(variant, set()).add(colour)
    assert {"as written", "tuned"} <= set(drawn)
    assert all(colours == {charts.variant_colour(v)} for v, colours in drawn.items())


# -- ratios ---------------------------------------------------------------------------------------------------
def test_ratio_dots_draw_dots_on_a_symmetric_log_axis_with_a_rule_at_one():
    spec = charts.ratio_dots(RATIOS, title="speed", x_title="numpy time / variant time").to_dict()
    assert _reference_rules(spec, "x") == [1.0]
    x_scales = _scales(spec, "x")
    assert x_scales and all(s["type"] == "log" for s in x_scales)
    low, high = x_scales[0]["domain"]
    assert low == pytest.approx(1 / high) and low < 1 < high and high > 6   # symmetric about 1, holds 6x
    assert {_mark(layer)["type"] for layer in _layers(spec)} == {"rule", "point"}


def test_ratio_dots_colour_each_variant_with_its_fixed_colour_and_draw_published_hollow():
    spec = charts.ratio_dots(RATIOS, title="speed", x_title="ratio").to_dict()
    dots = [layer for layer in _layers(spec) if _mark(layer)["type"] == "point"]
    colour = _encoding(dots[0], "color")
    assert colour["field"] == "variant"
    assert colour["scale"]["range"] == [charts.variant_colour(v) for v in colour["scale"]["domain"]]
    filled = {(r["label"], r["source"]): r["filled"] for r in _rows_of(spec)}
    assert filled[("numpy", "measured")] and not filled[("torch resident", "published")]
    assert _encoding(dots[0], "fillOpacity")["condition"]["test"] == "datum.filled"


def test_ratio_dots_without_variants_colour_by_series_and_name_what_is_missing():
    spec = charts.ratio_dots(RATIOS.drop(columns="variant"), title="t", x_title="x").to_dict()
    dots = [layer for layer in _layers(spec) if _mark(layer)["type"] == "point"]
    assert _encoding(dots[0], "color")["field"] == "series"
    with pytest.raises(ValueError, match="source"):
        charts.ratio_dots(RATIOS.drop(columns="source"), title="t", x_title="x")
    with pytest.raises(ValueError, match="source"):
        charts.ratio_dots(RATIOS.assign(source="guessed"), title="t", x_title="x")


@pytest.mark.full
def test_no_experiment_draws_a_bar_on_a_log_scale(shipped_specs):
    for name, specs in shipped_specs.items():
        for spec in specs:
            for layer in _layers(spec):
                if _mark(layer)["type"] == "bar":
                    for channel in ("x", "y"):
                        assert _encoding(layer, channel).get("scale", {}).get("type") not in ("log", "symlog"), name
                        assert _encoding(layer, channel).get("scale", {}).get("zero", True), name


@pytest.mark.full
def test_the_matmul_ratio_chart_has_numpy_at_one_and_a_rule_there(shipped_specs):
    spec = shipped_specs["matmul"][2]
    assert _reference_rules(spec, "x") == [1.0]
    drawn = {(r["label"], r["source"]): r["ratio"] for r in _rows_of(spec)}
    assert drawn[("numpy", "measured")] == 1.0
    assert drawn[("torch copy pageable", "published")] == 1.0   # the write-up's "as slow as numpy"
    assert "label" not in str([_encoding(layer, "y").get("title") for layer in _layers(spec)])


@pytest.mark.full
def test_a_curve_of_more_rows_than_altair_s_default_guard_is_drawn_whole():
    rows = _timed([{"size": size, "median_s": 1.0 + size} for size in range(1, 6001)])  # a long loss curve
    spec = charts.lines(charts.measured(rows, "median_s"), "size", "median_s", title="t", x_title="n", y_title="s",
                        points=False).to_dict()
    assert len(_rows_of(spec)) == 6000


# -- how a point is drawn -------------------------------------------------------------------------------------
def test_a_noisy_point_and_a_single_sample_are_hollow_and_named():
    rows = _timed([{"size": 1, "median_s": 1.0}, {"size": 2, "median_s": 2.0, "noisy": True, "iqr_s": 1.0},
                   {"size": 3, "median_s": 3.0, "n": 1, "iqr_s": None, "noisy": None}])
    drawn = charts.measured(rows, "median_s").set_index("size")
    assert list(drawn["filled"]) == [True, False, False]
    assert drawn.loc[2, "quality"].startswith("noisy: IQR above") and drawn.loc[3, "quality"] == "single sample"
    assert (drawn.loc[1, "lo"], drawn.loc[1, "hi"]) == pytest.approx((0.995, 1.005))   # median +- IQR / 2
    spec = charts.lines(drawn.reset_index(), "size", "median_s", title="t", x_title="n", y_title="s").to_dict()
    points = [layer for layer in _layers(spec) if _mark(layer)["type"] == "point"]
    assert _encoding(points[0], "fillOpacity")["condition"] == {"test": "datum.filled", "value": 1}
    assert any("lo" == _encoding(layer, "y").get("field") for layer in _layers(spec))   # the error bars


def test_a_rate_carries_its_iqr_through_the_inverse():
    drawn = charts.measured(_timed([{"size": 1, "median_s": 2.0, "iqr_s": 1.0, "rate": 10.0}]), "rate",
                            spread="rate").iloc[0]
    assert (drawn["lo"], drawn["hi"]) == pytest.approx((10.0 * 2 / 2.5, 10.0 * 2 / 1.5))


def test_a_skewed_sample_draws_its_error_bar_between_its_quartiles_not_evenly_about_the_median():
    samples = [0.0875, 0.088, 0.462]  # one slow call among three (a garbage collection): IQR above the median
    drawn = charts.measured(_timed([{"size": 1, "median_s": 0.088, "iqr_s": 0.18725, "n": 3, "samples_s": samples,
                                     "ms": 88.0}]), "ms").iloc[0]
    q1, q3 = timing.quartiles(samples)
    assert (drawn["lo"], drawn["hi"]) == pytest.approx((88.0 * q1 / 0.088, 88.0 * q3 / 0.088))
    assert 87 < drawn["lo"] < 88 < 270 < drawn["hi"]  # the bar starts near the median, not at a hundredth of it


def test_a_ratio_of_two_skewed_samples_is_bounded_by_their_quartiles():
    cpu = _timed([{"size": 1, "median_s": 1.0, "iqr_s": 1.5, "n": 3, "samples_s": [0.9, 1.0, 4.0]}])
    gpu = cpu.assign(device="cuda:0", median_s=0.1, iqr_s=0.05, samples_s=[[0.1, 0.1, 0.2]])
    pair = charts.paired_ratio(gpu, cpu, ["point"]).iloc[0]
    (cpu_q1, cpu_q3), (gpu_q1, gpu_q3) = timing.quartiles([0.9, 1.0, 4.0]), timing.quartiles([0.1, 0.1, 0.2])
    assert pair["ratio"] == pytest.approx(0.1)
    assert (pair["lo"], pair["hi"]) == pytest.approx((gpu_q1 / cpu_q3, gpu_q3 / cpu_q1))
    assert pair["lo"] > 0.1 / 100  # an even split of the CPU's IQR would have reached below zero


def test_line_end_labels_that_would_overlap_are_moved_apart_and_others_stay_at_their_point():
    ends = pd.DataFrame({"panel": "p", "run": "r", "device": "cpu", "source": "measured", "lo": None, "hi": None,
                         "variant": ["as written", "tuned", "as written", "tuned", "as written"],
                         "line": ["MNIST", "MNIST", "GRU", "GRU", "MNIST"],
                         "batch": [512, 512, 512, 512, 64], "ms": [200.0, 210.0, 10.0, 11.0, 30.0]})
    heights = charts.label_heights(ends, "batch", "ms", log=True, height=240)
    assert heights.isna().tolist() == [False, False, False, False, True]  # an end per line; batch 64 is not one
    decades = 3 - 1  # the data's range, 10 to 210 ms, rounded out to whole decades: 10 to 1,000
    gap = charts.LABEL_GAP / 240 * decades
    logs = np.log10(heights[:4].to_numpy())
    assert logs[0] == pytest.approx(np.log10(200.0)) and logs[2] == pytest.approx(1.0)  # the lower of each pair
    assert logs[1] - logs[0] == pytest.approx(gap) and logs[3] - logs[2] == pytest.approx(gap)  # moved up to clear
    apart = ends.assign(ms=[200.0, 400.0, 10.0, 20.0, 30.0])
    assert charts.label_heights(apart, "batch", "ms", log=True, height=240)[:4].tolist() == pytest.approx([200, 400, 10, 20])
    single = ends.assign(lo=ends["ms"] / 100)  # single samples: a lo the chart never draws (no hi), so no wider axis
    assert charts.label_heights(single, "batch", "ms", log=True, height=240).tolist() == pytest.approx(
        heights.tolist(), nan_ok=True)
    unnamed = ends.assign(line=["", "", "GRU", "GRU", ""])  # a line with no text takes no label's room
    assert charts.label_heights(unnamed, "batch", "ms", log=True, height=240)[:2].isna().all()
    ratios = ends.assign(ms=[1.0, 1.01, 0.5, 0.505, 0.8])  # a ratio axis spans ratio_domain (1/3 to 3 here)
    low, high = charts.ratio_domain(ratios["ms"])
    moved = np.log10(charts.label_heights(ratios, "batch", "ms", log=True, height=240, ratio=True)[:2].to_numpy())
    assert moved[1] - moved[0] == pytest.approx(charts.LABEL_GAP / 240 * np.log10(high / low)) and high / low < 10


def test_two_runs_of_one_variant_give_two_lines_in_two_panels():
    first = _timed([{"size": s, "median_s": s} for s in (1, 2)])
    second = first.assign(run_id="r2", preset="smoke", status="cancelled", started="2026-01-02T00:00:00+00:00")
    spec = charts.measured_lines(pd.concat([first, second]), "size", "median_s", title="t", x_title="n",
                                 y_title="s").to_dict()
    assert spec["facet"]["field"] == "panel"
    panels = {r["panel"] for r in _rows_of(spec)}
    assert len(panels) == 2 and any("smoke" in p and "cancelled" in p for p in panels)
    lines = [layer for layer in _layers(spec) if _mark(layer)["type"] == "line"]
    assert all("run" in [d["field"] for d in _encoding(layer, "detail")] for layer in lines)


def test_the_source_legend_goes_below_panels_side_by_side_and_beside_a_single_chart():
    first = _timed([{"size": s, "median_s": s} for s in (1, 2)])
    second = first.assign(run_id="r2", started="2026-01-02T00:00:00+00:00")

    def source_legends(frame) -> list[str]:
        spec = charts.measured_lines(frame, "size", "median_s", title="t", x_title="n", y_title="s").to_dict()
        return [_encoding(layer, "strokeDash")["legend"]["orient"] for layer in _layers(spec)
                if "legend" in _encoding(layer, "strokeDash")]

    assert source_legends(pd.concat([first, second])) == ["bottom"]  # two panels fill the page's width
    assert source_legends(first) == ["right"]


def test_published_figures_are_hollow_and_a_single_figure_is_a_dashed_rule():
    figures = pd.DataFrame({"figure": ["one", "sweep", "sweep"], "device": ["GPU", "CPU", "CPU"],
                            "value": [2.0, 1.0, 3.0], "hardware": ["K80", "i7", "i7"], "size": [None, 1, 2]})
    drawn = charts.published(figures)
    assert not drawn["filled"].any()
    assert list(drawn["single"]) == [True, False, False]
    rows = _timed([{"size": 1, "median_s": 1.0, "value": 1.5}])
    spec = charts.lines(pd.concat([charts.measured(rows, "value"), drawn]), "size", "value", title="t",
                        x_title="n", y_title="s").to_dict()
    rules = [layer for layer in _layers(spec) if _mark(layer)["type"] == "rule" and _mark(layer).get("strokeDash")]
    assert rules and "datum.single" in str(rules[0].get("transform"))


def test_predicted_points_are_dotted_and_hollow_and_the_legend_says_so():
    rows = _timed([{"size": 1, "median_s": 1.0}])
    spec = charts.lines(pd.concat([charts.measured(rows, "median_s"), charts.predicted(rows)]), "size", "median_s",
                        title="t", x_title="n", y_title="s").to_dict()
    dotted = [layer for layer in _layers(spec) if _mark(layer)["type"] == "line" and _mark(layer).get("strokeDash")]
    assert dotted and "predicted" in str(dotted[0]["transform"])
    dash = next(_encoding(layer, "strokeDash") for layer in _layers(spec) if _encoding(layer, "strokeDash"))
    assert dict(zip(dash["scale"]["domain"], dash["scale"]["range"])) == {"measured": [1, 0], "predicted": [2, 2]}
    assert not [r for r in _rows_of(spec) if r["source"] == "predicted" and r["filled"]]


def test_measured_and_predicted_keeps_its_signature_and_draws_predictions_dotted():
    data = pd.DataFrame({"size": [1, 2, 1, 2], "per_unit_s": [1.0, 2.0, 0.5, 0.7], "series": ["cpu"] * 2 + ["T4"] * 2,
                         "predicted": [False, False, True, True], "line": [""] * 4})
    spec = charts.measured_and_predicted(data, "size", title="t", x_title="n", y_title="s per unit").to_dict()
    dotted = [layer for layer in _layers(spec) if _mark(layer)["type"] == "line" and _mark(layer).get("strokeDash")]
    assert dotted and "predicted" in str(dotted[0]["transform"])


def test_run_label_names_the_preset_the_start_the_machine_and_an_unfinished_status():
    rows = pd.DataFrame({"preset": ["quick", "smoke"], "started": ["2026-11-22T06:09:58+00:00"] * 2,
                         "machine": ["Intel(R) Xeon(R) Processor (2 threads) / no GPU",
                                     "AMD EPYC 7B12 (8 threads) / Tesla T4"], "status": ["complete", "cancelled"]})
    quick, smoke = charts.run_label(rows)
    assert quick.startswith("quick · 22 Nov") and quick.endswith(" · Intel Xeon")
    assert smoke.startswith("smoke · ") and smoke.endswith("AMD EPYC 7B12 / Tesla T4 · cancelled")


def test_a_breakdown_bar_of_several_runs_names_its_machine_once():
    machine = "Intel(R) Xeon(R) Processor (16 threads) / NVIDIA H200"
    rows = pd.DataFrame([{"variant": "as written", "device": "cpu", "machine": machine, "run_id": run_id,
                          "preset": "quick", "started": started, "status": "complete", "per_call": 1, "median_s": 1.0,
                          **{f"time_{part}_s": 0.2 for part in charts.TIME_PARTS}}
                         for run_id, started in (("r1", "2026-11-27T07:14:00+00:00"), ("r2", "2026-11-27T07:19:00+00:00"))])
    chart = charts.where_time_goes(rows, pd.Series(["16 operations per epoch"] * 2, index=rows.index), "epoch")
    bars = chart.data["bar"].unique()
    assert len(bars) == 2 and all(bar.count("Xeon") == 1 for bar in bars), bars
