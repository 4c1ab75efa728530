"""The one chart grammar of the app: every experiment's charts are built from these pieces.

- Colour is the variant, and a variant has one fixed colour on every page (`variant_colour`: assigned over the
  registered experiments' variants, never from the series a chart happens to hold).
- Shape is the device (CPU a circle, the GPU a triangle).
- The source is the mark: measured solid with filled points, published hollow (with a dashed rule where the
  write-up gives a single figure), predicted dotted and hollow. A measured point that is noisy or a single
  sample is drawn hollow and says so in its tooltip; every measured point carries its IQR as an error bar.
- Ratios are dots on a log axis symmetric about 1, with a reference rule at 1. Bars only where zero means
  something, on an axis that starts at zero.
- Rows of several runs are never joined: one line per run, and one panel per run when more than one is drawn.

The frames the pieces draw have the columns `source` (measured, published, predicted), `variant`, `device`
(its label: CPU, GPU), `run` (the run's label), `look` (how a point is drawn) and, for a measured figure,
`lo`/`hi` (its IQR, scaled like the figure) and `quality` (why it is hollow). `measured`, `published` and
`predicted` build them from the rows frame, the write-ups' figures and a prediction."""
import hashlib
import json
import math
from functools import lru_cache
from typing import Callable, Iterable

import altair as alt
import numpy as np
import pandas as pd

from core.measure import breakdown
from core.store import results, runs
from core.present.analysis import ok
from core.measure.timing import NOISY_SPREAD, quartiles

LEGEND = alt.Legend(labelLimit=0)  # series names can be long: never cut them
# A loss curve per run picked passes Altair's guard of 5,000 rows a chart (its data is embedded in the spec either way)
alt.data_transformers.disable_max_rows()
AS_WRITTEN = "as written"   # the variant a write-up's own figures stand for, unless they name one
PANEL_WIDTH, PANEL_HEIGHT = 280, 240   # one panel per run, two to a row in the page's column
CHART_HEIGHT = 300
LABEL_GAP = 13  # pixels between two line-end labels' middles: their 11-pixel text and a little air
# a single chart fits the page's width only: fitting the height too (Streamlit's default) lets a long legend
# squash the plot
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")

# -- colour: one fixed colour per variant -------------------------------------------------------------------
# Twenty colours that read on white, the most distinct first: the first variants of the registry (those the
# write-ups share: as written, tuned) get those.
VARIANT_PALETTE = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#b79a20", "#b279a2", "#d67195",
                   "#17becf", "#9e765f", "#393b79", "#ad494a", "#637939", "#7b4173", "#e7ba52", "#1b9e77",
                   "#6b6ecf", "#79706e", "#843c39", "#bcbd22")


_declared_variants: Callable[[], Iterable[str]] = tuple


def declare_variants(names: Callable[[], Iterable[str]]) -> None:
    """Where the declared variant names come from: the registry (core.experiments) says so when it is imported,
    which is before any experiment's charts exist."""
    global _declared_variants
    _declared_variants = names
    variant_colours.cache_clear()


@lru_cache(maxsize=1)
def variant_colours() -> dict[str, str]:
    """Every variant name of every registered experiment, in registry order (an experiment's variants in
    the order it declares them), to a colour of VARIANT_PALETTE; a name two experiments share ("as
    written", "tuned") has one colour. Built from the declarations, so a new run never recolours a series."""
    names = dict.fromkeys(_declared_variants())
    return {name: VARIANT_PALETTE[i % len(VARIANT_PALETTE)] for i, name in enumerate(names)}


def variant_colour(name: str) -> str:
    """The fixed colour of a variant, the same on every page; a name no registered experiment declares
    gets a colour from a hash of the name (stable, though it may share one with a declared variant)."""
    known = variant_colours()
    if name in known:
        return known[name]
    return VARIANT_PALETTE[int(hashlib.sha256(str(name).encode()).hexdigest(), 16) % len(VARIANT_PALETTE)]


def variant_scale(variants) -> alt.Scale:
    """A colour scale over the variants drawn (in the registry's order), each with its fixed colour."""
    order = list(variant_colours())
    drawn = sorted({v for v in variants if isinstance(v, str)},
                   key=lambda v: (order.index(v) if v in order else len(order), v))
    return alt.Scale(domain=drawn, range=[variant_colour(v) for v in drawn])


SWATCH = "M-1,-0.5H1V0.5H-1Z"  # a legend symbol that is a patch of colour, not a point's shape


def variant_color(variants, symbol: str = "stroke") -> alt.Color:
    """The colour channel: the variant, on its fixed scale; the legend's symbols are `symbol` (a stroke
    beside lines: the variant is a colour, the shape is the device's)."""
    return alt.Color("variant:N", title="variant", scale=variant_scale(variants),
                     legend=alt.Legend(labelLimit=0, symbolType=symbol, symbolStrokeWidth=3, symbolOpacity=1))


# -- device: by shape ---------------------------------------------------------------------------------------
DEVICE_SHAPES = {"CPU": "circle", "GPU": "triangle-up"}
OTHER_SHAPES = ("square", "diamond", "triangle-down", "cross")


def device_label(device) -> str:
    """'CPU', 'GPU' (the first GPU, or a write-up's), or 'GPU <device>' for another accelerator."""
    text = str(device)
    if text.lower() == "cpu":
        return "CPU"
    return "GPU" if text in ("GPU", "cuda", "cuda:0") else f"GPU {text}"


def device_shape(labels) -> alt.Shape:
    drawn = sorted(set(labels), key=lambda d: (d not in DEVICE_SHAPES, d))
    others = iter(OTHER_SHAPES * len(drawn))
    shapes = [DEVICE_SHAPES.get(d) or next(others) for d in drawn]
    return alt.Shape("device:N", title="device", scale=alt.Scale(domain=drawn, range=shapes),
                     legend=alt.Legend(labelLimit=0, symbolStrokeColor="#555", symbolStrokeWidth=2,
                                       symbolFillColor="transparent", symbolOpacity=1))


# -- source: how a point is drawn --------------------------------------------------------------------------
SOURCES = ("measured", "published", "predicted")
NOISY, SINGLE = "noisy", "single sample"
LOOKS = {  # how a point is drawn: filled or not, its outline, its legend text
    "measured": (True, [1, 0], "measured (filled)"),
    "measured, hollow": (False, [1, 0], "measured, noisy or a single sample (hollow)"),
    "published": (False, [1, 0], "published (hollow, larger)"),
    "predicted": (False, [2, 2], "predicted (dotted, hollow)"),
}
LEGEND_GREY = "#555"
# a write-up's figure is drawn larger than a hollow (noisy) measured point, so that the two do not read alike
# (channels are built once, as objects: Altair parses a string or a dict again at every encode, slowly)
POINT_SIZE = alt.SizeValue(80, condition={"test": "datum.source == 'published'", "value": 170})
FILLED = alt.FillOpacityValue(0, condition={"test": "datum.filled", "value": 1})
LINE_KEYS = [alt.Detail("run:N"), alt.Detail("device:N"), alt.Detail("line:N")]


def _check_sources(data: pd.DataFrame) -> None:
    unknown = set(data["source"]) - set(SOURCES)
    if unknown:
        raise ValueError(f"source {sorted(map(str, unknown))} is not one of {', '.join(SOURCES)}")


def with_look(data: pd.DataFrame) -> pd.DataFrame:
    """`look` and `filled` from `source` and, for measured points, `quality` (noisy or a single sample)."""
    _check_sources(data)
    quality = data["quality"] if "quality" in data else pd.Series("", index=data.index)
    hollow = (data["source"] == "measured") & quality.fillna("").astype(str).ne("")
    look = data["source"].where(~hollow, "measured, hollow")
    return data.assign(look=look, filled=look.map(lambda k: LOOKS[k][0]))


def look_encoding(looks, symbol: str = "circle", orient: str = "right") -> dict:
    """strokeDash by `look` with the one legend that says how each source is drawn (its symbols drawn as the
    marks are: filled, hollow, dotted)."""
    drawn = [k for k in LOOKS if k in set(looks)]
    filled = json.dumps([k for k in drawn if LOOKS[k][0]])
    legend = alt.Legend(title="source", labelExpr=_mapping_expr({k: LOOKS[k][2] for k in drawn}), labelLimit=0,
                        orient=orient,
                        symbolType=symbol, symbolStrokeColor=LEGEND_GREY, symbolStrokeWidth=2, symbolOpacity=1,
                        symbolFillColor={"expr": f"indexof({filled}, datum.value) >= 0 ? '{LEGEND_GREY}' : "
                                                 "'transparent'"})
    return {"strokeDash": alt.StrokeDash("look:N", legend=legend,
                                         scale=alt.Scale(domain=drawn, range=[LOOKS[k][1] for k in drawn]))}


def fill_where_filled(colour: alt.Color) -> dict:
    """Fill with the colour, opaque where `filled`, else transparent: hollow points and bars. (An opacity
    condition rather than a fill condition, so that the look legend's symbols keep their own fill.)"""
    spec = colour.to_dict()
    return {"fill": alt.Fill(field=spec["field"], type=spec["type"], scale=spec.get("scale", alt.Undefined),
                             legend=None),
            "fillOpacity": FILLED}


def _mapping_expr(mapping: dict[str, str]) -> str:
    """A Vega expression mapping a legend label through `mapping` (the label itself when not in it)."""
    return f"({json.dumps(mapping)})[datum.label] || datum.label"


def _symbol(shapes: set) -> str:
    """The legend symbol that matches the points drawn: their shape when they all have one, else a circle."""
    return DEVICE_SHAPES.get(next(iter(shapes)), "circle") if len(shapes) == 1 else "circle"


# -- runs ---------------------------------------------------------------------------------------------------
def run_label(rows: pd.DataFrame) -> pd.Series:
    """A short text per row naming its run (core.store.runs.short_label): 'quick · 22 Nov 06:09 · Intel Xeon', and
    ' · cancelled' and the like when the run did not complete."""
    runs_of_rows = pd.DataFrame({name: rows[name] if name in rows else None
                                 for name in ("preset", "started", "machine", "status")}, index=rows.index)
    runs_of_rows["status"] = runs_of_rows["status"].fillna("complete")
    return runs_of_rows.apply(runs.short_label, axis=1).astype(object) if len(rows) else pd.Series(
        [], index=rows.index, dtype=object)


def runs_drawn(data: pd.DataFrame) -> list[str]:
    """The runs of the points drawn (not the write-ups'), the latest first."""
    ours = data[data["source"] != "published"] if "source" in data else data
    if "run" not in ours:
        return []
    ours = ours.sort_values("started", ascending=False, kind="stable") if "started" in ours else ours
    return list(dict.fromkeys(ours["run"].dropna()))


# -- the frames the pieces draw -----------------------------------------------------------------------------
def measured(rows: pd.DataFrame, value: str, *, spread: str = "time") -> pd.DataFrame:
    """The measured points of `rows` ready to draw: `value` with its IQR as `lo`/`hi` (the sample's IQR
    scaled as `value` is from median_s: `spread` "time" for a figure proportional to the time, "rate" for
    one inverse to it, None for a figure that is not a time), and `quality` naming a noisy point or a
    single sample."""
    data = ok(rows) if "point_status" in rows else rows
    data = data.reset_index(drop=True)  # rows of several runs may repeat index labels
    data = data[pd.to_numeric(data[value], errors="coerce").notna()] if value in data else data.iloc[0:0]
    timed = spread and {"median_s", "iqr_s", "n"} <= set(data.columns)
    out = data.assign(source="measured", device=data["device"].map(device_label), run=run_label(data),
                      quality=_quality(data) if timed else "", spread="")
    if timed and len(out):
        out = out.join(_bounds(out, value, spread))
        out["spread"] = _spread_text(out)
    return with_look(out)


def _quality(data: pd.DataFrame) -> pd.Series:
    single = data["n"].fillna(1).astype(float) < 2 if "n" in data else pd.Series(True, index=data.index)
    noisy = data["noisy"].eq(True) if "noisy" in data else pd.Series(False, index=data.index)
    noisy_text = f"{NOISY}: IQR above {NOISY_SPREAD:.0%} of the median"
    return pd.Series([SINGLE if s else (noisy_text if n else "") for s, n in zip(single, noisy)],
                     index=data.index, dtype=object)


def _bounds(data: pd.DataFrame, value: str, spread: str) -> pd.DataFrame:
    """lo and hi: the samples' quartiles (_quartiles) over their median, carried over to `value` (through 1/t for a
    rate)."""
    low, high = (share / data["median_s"].astype(float) for share in _quartiles(data))
    y = data[value].astype(float)
    if spread == "rate":
        lo, hi = y / high, y / low.where(low > 0)
    else:
        lo, hi = y * low, y * high
    return pd.DataFrame({"lo": lo.where(lo > 0, y / 100), "hi": hi}, index=data.index)


def _quartiles(data: pd.DataFrame, suffix: str = "") -> tuple[pd.Series, pd.Series]:
    """Each row's lower and upper quartiles of its samples (`samples_s` + suffix); a row that carries its IQR but
    not its samples, its median -+ half the IQR; NaN for a single sample. One slow call among three puts the IQR
    above the median, where an even split would draw a bar down to nothing."""
    samples = data.get("samples_s" + suffix, pd.Series(None, index=data.index, dtype=object))
    median, half = data["median_s" + suffix].astype(float), data["iqr_s" + suffix].astype(float) / 2
    found = [quartiles(s) if isinstance(s, (list, tuple)) else None for s in samples]
    low = pd.Series([q[0] if q else np.nan for q in found], index=data.index).fillna(median - half)
    high = pd.Series([q[1] if q else np.nan for q in found], index=data.index).fillna(median + half)
    single = data["n" + suffix].fillna(1).astype(float) < 2
    return low.mask(single), high.mask(single)


def _spread_text(data: pd.DataFrame) -> pd.Series:
    share = data["iqr_s"].astype(float) / data["median_s"].astype(float)
    text = "IQR " + (share * 100).round(1).astype(str) + "% of the median, n = " + data["n"].astype("Int64").astype(str)
    return text.where(share.notna(), "no IQR: " + SINGLE)


def paired_ratio(top: pd.DataFrame, bottom: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """`ratio` = top's median time / bottom's, for the measured rows of one run that share `on` (a GPU point
    over its run's CPU point, a variant over its run's baseline), as a measured frame of bottom's rows:
    `lo`/`hi` bound the ratio by both IQRs (the slowest top over the fastest bottom and back), and the
    quality of either side (noisy, a single sample) makes the ratio's point hollow. A run that measured no
    top row (its machine's GPU run apart from its CPU run) takes the latest top row of its machine and
    configuration among those given."""
    timing = ["median_s", "iqr_s", "n", "noisy", "samples_s"]
    top = ok(top).reindex(columns=["run_id", "machine_id", "config_id", "started", *on, *timing])
    bottom = ok(bottom)
    bottom = bottom.reindex(columns=[*bottom.columns, *(c for c in timing if c not in bottom)])
    same_run = bottom.merge(top.drop(columns=["machine_id", "config_id", "started"]).drop_duplicates(["run_id", *on]),
                            on=["run_id", *on], suffixes=("", "_top"))
    apart = bottom[~bottom["run_id"].isin(top["run_id"])]
    latest = top.sort_values("started", kind="stable").drop_duplicates(["machine_id", "config_id", *on], keep="last")
    beside = apart.merge(latest.drop(columns=["run_id", "started"]), on=["machine_id", "config_id", *on],
                         suffixes=("", "_top"))
    pairs = pd.concat([same_run, beside], ignore_index=True) if len(beside) else same_run
    if pairs.empty:
        return with_look(pairs.assign(ratio=[], lo=[], hi=[], source="measured", quality="", spread="", run=""))
    low_top, high_top = (q.fillna(pairs["median_s_top"]) for q in _quartiles(pairs, "_top"))
    low, high = (q.fillna(pairs["median_s"]) for q in _quartiles(pairs))
    ratio = pairs["median_s_top"] / pairs["median_s"]
    slowest = low_top / high
    fastest = high_top / low.where(low > 0)
    either = pd.concat([_quality(pairs), _quality(pairs.assign(n=pairs["n_top"], noisy=pairs["noisy_top"]))], axis=1)
    quality = either.apply(lambda q: "; ".join(dict.fromkeys(t for t in q if t)), axis=1)
    spread = ("IQR " + (pairs["iqr_s_top"] / pairs["median_s_top"] * 100).round(1).astype(str) + "% over "
              + (pairs["iqr_s"] / pairs["median_s"] * 100).round(1).astype(str) + "% of the medians")
    return with_look(pairs.assign(
        ratio=ratio, lo=slowest.where(slowest > 0, ratio / 100), hi=fastest, source="measured",
        device=pairs["device"].map(device_label), run=run_label(pairs), quality=quality,
        spread=spread.where(pairs[["iqr_s", "iqr_s_top"]].notna().all(axis=1), "no IQR: " + SINGLE)))


def published(figures: pd.DataFrame, value: str = "value", *, variant: str = AS_WRITTEN,
              single: bool = None) -> pd.DataFrame:
    """The write-up's figures ready to draw (as `value`): hollow, coloured as `variant` unless a figure names
    its own; `single` where the write-up gives one figure (by default: one value per figure and device),
    drawn as a dashed rule too."""
    if figures.empty:
        return pd.DataFrame(columns=["source", "variant", "device", "run", value, "single", "look", "filled"])
    figures = figures.reset_index(drop=True)
    named = figures["variant"] if "variant" in figures else pd.Series(None, index=figures.index, dtype=object)
    if single is None:
        single = figures.groupby(["figure", "device"])["value"].transform("size") == 1
    out = figures.assign(source="published", variant=named.fillna(variant), device=figures["device"].map(device_label),
                         run="published: " + figures["hardware"].fillna("hardware not stated"), single=single)
    if value != "value":
        out[value] = figures["value"]
    return with_look(out)


def published_ratios(ratios: pd.DataFrame, ratio: str = "speedup", *, variant: str = AS_WRITTEN,
                     device: str = "GPU", single: bool = False) -> pd.DataFrame:
    """The write-up's ratios (core.present.analysis.published_cpu_over_gpu's frame, say) ready to draw as `ratio`:
    hollow, on `device`, coloured as `variant`; `single` when it is the write-up's only figure (a rule too)."""
    return with_look(ratios.assign(ratio=ratios[ratio], source="published", variant=variant,
                                   device=device_label(device), single=single,
                                   run="published: " + ratios["hardware"].fillna("hardware not stated")))


def predicted(rows: pd.DataFrame) -> pd.DataFrame:
    """Predicted (or estimated) points ready to draw: dotted and hollow, never taken for a measurement."""
    rows = rows.reset_index(drop=True)
    return with_look(rows.assign(source="predicted", device=rows["device"].map(device_label), run=run_label(rows)))


def per_run(rows: pd.DataFrame, compare) -> pd.DataFrame:
    """An analysis function that compares the latest complete run's points (`compare(rows) -> frame`),
    applied to each run's measured rows on its own, each standing as complete (a chart draws the runs the
    reader picked, cancelled ones too), with the run's `run_id` and run label (`run`) on every row."""
    measured = ok(rows)
    out = [compare(part.assign(status="complete")).assign(run_id=run_id, run=run_label(part).iloc[0])
           for run_id, part in measured.groupby("run_id", sort=False)]
    return pd.concat(out, ignore_index=True) if out else compare(measured).assign(run_id=[], run=[])


def tooltips(items) -> list[alt.Tooltip]:
    """Tooltip channels from column names or channels (as objects: see POINT_SIZE)."""
    return [alt.Tooltip(item) if isinstance(item, str) else item for item in items]


def _value_tooltip(value: str, title: str) -> alt.Tooltip:
    return alt.Tooltip(f"{value}:Q", title=title, format=".3~g")


BASE_TOOLTIP = [alt.Tooltip("variant:N"), alt.Tooltip("device:N"), alt.Tooltip("source:N"), alt.Tooltip("run:N"),
                alt.Tooltip("quality:N", title="note"), alt.Tooltip("spread:N", title="spread")]


# -- lines of a figure against a swept parameter ------------------------------------------------------------
def lines(data: pd.DataFrame, x: str, y: str, *, title: str, x_title: str, y_title: str, log_x: bool = True,
          log_y: bool = True, ratio: bool = False, x_sort: list = None, line: str = None, points: bool = True,
          limit: tuple[str, str] = None, tooltip=()) -> alt.TopLevelMixin:
    """`y` against `x` for frames built by `measured`, `published` and `predicted` (concatenated): one line
    per run, variant, device and `line` (another swept parameter, named at each line's end), coloured by
    variant, shaped by device, drawn by source; measured points with their IQR as error bars; a published
    figure given alone also as a dashed rule. `ratio`: y is a ratio, on a log axis symmetric about 1 with a
    rule at 1. `x_sort`: x is ordinal, in this order. `points`: False for curves of many points (a loss
    curve): lines only, the tooltip on the line. `limit`: (column, what it is), drawn as a dashed grey rule at
    its median per run and device (the free memory, say). With more than one run, one panel per run."""
    data = _prepared(data, [x, y, "lo", "hi", *([limit[0]] if limit else [])], line)
    data = data[data[y].notna() & (data[x].notna() | data["source"].eq("published"))]
    runs = runs_drawn(data)
    data = _per_panel(data, runs)
    x_enc = (alt.X(f"{x}:O", title=x_title, sort=x_sort, axis=alt.Axis(labelAngle=0)) if x_sort is not None else
             alt.X(f"{x}:Q", title=x_title, scale=_scale(log_x), axis=_ticks_at(data[x])))
    y_scale = ratio_scale(data[y]) if ratio else {"scale": _scale(log_y)}
    y_enc = alt.Y(f"{y}:Q", title=y_title, **y_scale)
    colour = variant_color(data["variant"])
    tip = [_value_tooltip(y, y_title), alt.Tooltip(f"{x}:{'O' if x_sort is not None else 'Q'}", title=x_title),
           *BASE_TOOLTIP, *tooltips(tooltip)]
    base = alt.Chart().encode(x=x_enc, y=y_enc, color=colour)
    keys = LINE_KEYS
    layers = [
        base.mark_line(strokeWidth=2).encode(detail=keys, **({} if points else {"tooltip": tip})).transform_filter(
            "datum.source == 'measured'"),
        base.mark_line(strokeWidth=2, strokeDash=[2, 2]).encode(detail=keys).transform_filter(
            "datum.source == 'predicted'"),
        base.mark_rule(strokeWidth=1.5).encode(y=alt.Y("lo:Q"), y2=alt.Y2("hi:Q"), detail=keys).transform_filter(
            "isValid(datum.lo) && isValid(datum.hi)"),
        base.mark_rule(strokeDash=[6, 4], strokeWidth=1.5).encode(x=alt.XValue(0), x2=alt.X2Value("width"), tooltip=tip)
        .transform_filter("datum.source == 'published' && datum.single"),
    ]
    if points:
        layers.append(base.mark_point(strokeWidth=2, opacity=1).encode(
            shape=device_shape(data["device"]), size=POINT_SIZE, **fill_where_filled(colour),
            # panels side by side fill the page's width: the source legend goes below them, with the others
            **look_encoding(data["look"], _symbol(set(data["device"])), orient="bottom" if len(runs) > 1 else "right"),
            tooltip=tip).transform_filter(
            f"isValid(datum['{x}'])"))
    if ratio:
        layers.insert(0, ratio_rule("y"))
    if limit:
        column, what = limit
        layers.append(alt.Chart().mark_rule(strokeDash=[4, 4], color="#888").encode(
            y=alt.Y(f"median({column}):Q"), detail=LINE_KEYS[:2],
            tooltip=[alt.Tooltip("device:N"), alt.Tooltip(f"median({column}):Q", title=what, format=".3~g")]))
    if line:
        height = PANEL_HEIGHT if len(runs) > 1 else CHART_HEIGHT
        data["label_y"] = label_heights(data, x, y, log=log_y or ratio, height=height, ratio=ratio)
        layers.append(base.mark_text(align="left", dx=6, fontSize=11).encode(
            y=alt.Y("label_y:Q", title=y_title, **y_scale), text=alt.Text("line:N"), detail=LINE_KEYS[:2]
        ).transform_filter("isValid(datum.label_y)"))
    return _panels(layers, data, runs, title)


def _prepared(data: pd.DataFrame, numeric: list[str], line: str | None) -> pd.DataFrame:
    data = data.reset_index(drop=True).copy()
    for column in ("quality", "spread", "run", "variant", "device"):
        if column not in data:
            data[column] = "" if column in ("quality", "spread") else None
    data["quality"], data["spread"] = data["quality"].fillna(""), data["spread"].fillna("")
    data["single"] = data["single"].eq(True) if "single" in data else False
    for column in numeric:
        data[column] = pd.to_numeric(data[column], errors="coerce") if column in data else float("nan")
    data["line"] = data[line].astype(str) if line else ""
    return _jsonable(data)


def _jsonable(data: pd.DataFrame) -> pd.DataFrame:
    """Only the columns a spec can carry: lists, arrays and dicts (samples, surfaces) stay out."""
    nested = [c for c in data.columns if data[c].map(lambda v: isinstance(v, (list, tuple, dict)) or
                                                    hasattr(v, "shape")).any()]
    return data.drop(columns=nested)


def _per_panel(data: pd.DataFrame, runs: list[str]) -> pd.DataFrame:
    """With several runs, the `panel` of each row: its run; published figures repeated in every panel."""
    if len(runs) < 2:
        return data.assign(panel="")
    theirs = data[data["source"] == "published"]
    ours = data[data["source"] != "published"].assign(panel=lambda d: d["run"])
    return pd.concat([ours, *[theirs.assign(panel=run) for run in runs]], ignore_index=True)


def _panels(layers: list, data: pd.DataFrame, runs: list[str], title: str, *, columns: int = 2,
            height=CHART_HEIGHT, width: int = PANEL_WIDTH) -> alt.TopLevelMixin:
    """The layers over `data`: one chart fitting the page's width, or with several runs one panel per run."""
    chart = alt.layer(*layers, data=data)
    if len(runs) < 2:
        return chart.properties(title=title, height=height, autosize=FIT_WIDTH)
    return chart.properties(width=width, height=PANEL_HEIGHT if columns > 1 else height).facet(
        facet=alt.Facet("panel:N", title=None, sort=runs, header=alt.Header(labelLimit=0, labelFontWeight="bold")),
        columns=columns).properties(title=title).configure_legend(orient="bottom", direction="vertical")


def _axis_span(data: pd.DataFrame, y: str, log: bool, ratio: bool) -> float:
    """How far the y axis reaches, in decades on a log axis: a ratio's domain (ratio_domain); else the values and
    the error bars drawn (both ends valid, as the rule layer draws them), rounded out to whole decades on a log
    axis, as Vega's nice scale does."""
    if ratio:
        return float(np.diff(np.log10(ratio_domain(data[y])))[0])
    bars = data[["lo", "hi"]].where(data["lo"].notna() & data["hi"].notna())
    drawn = pd.concat([data[y], bars["lo"], bars["hi"]]).astype(float).dropna()
    drawn = np.log10(drawn[drawn > 0]) if log else drawn
    if drawn.empty:
        return 0.0
    return float(np.ceil(drawn.max()) - np.floor(drawn.min()) if log else drawn.max() - drawn.min())


def label_heights(data: pd.DataFrame, x: str, y: str, *, log: bool, height: int, ratio: bool = False) -> pd.Series:
    """Where each line's `line` text goes beside its last point: at the point's `y`, moved up just enough that no
    two labels ending at one x of one panel overlap (LABEL_GAP pixels apart on an axis `height` pixels tall over
    _axis_span, every panel sharing it); NaN on every other row and for a line with no text. Two variants of one
    model that end together would otherwise print its name twice over itself."""
    ours = data[(data["source"] != "published") & data[x].notna() & data["line"].ne("")
                & (data[y] > 0 if log else data[y].notna())]
    keys = ["panel", "run", "variant", "device", "line"]
    ends = ours.loc[ours.groupby(keys, dropna=False)[x].idxmax()]
    place = np.log10 if log else np.asarray
    gap = LABEL_GAP / height * (_axis_span(data, y, log, ratio) or 1.0)
    heights = pd.Series(np.nan, index=data.index)
    for _, column in ends.groupby(["panel", x]):
        at = pd.Series(place(column[y].astype(float)), index=column.index).sort_values()
        moved = np.maximum.accumulate(at.to_numpy() - gap * np.arange(len(at))) + gap * np.arange(len(at))
        heights[at.index] = 10 ** moved if log else moved
    return heights


def _scale(log: bool) -> alt.Scale:
    return alt.Scale(type="log") if log else alt.Scale(zero=False)


# -- ratios: dots on a log axis symmetric about 1 -----------------------------------------------------------
def ratio_domain(ratios: pd.Series) -> list[float]:
    """A log axis symmetric about 1 holding every ratio with room to spare: [1/m, m], m at least 2."""
    ratios = pd.to_numeric(pd.Series(ratios), errors="coerce")
    positive = ratios[ratios > 0]
    reach = max(positive.max(), 1 / positive.min()) if len(positive) else 1.0
    reach = max(2.0, reach * 1.5)
    return [1 / reach, reach]


def ratio_axis(domain: list[float]) -> alt.Axis:
    """Ticks that read as ratios ('0.5×', '2×'): at 1, 2 and 5 times the powers of ten inside `domain` when
    it spans a few decades, else at the powers of ten (every other one, and so on, to keep about nine)."""
    low, high = domain
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    if len(decades) <= 5:
        ticks = [m * 10.0 ** e for e in decades for m in (1, 2, 5)]
    else:
        every = math.ceil(len(decades) / 9)
        ticks = [10.0 ** e for e in decades if e % every == 0]
    return alt.Axis(values=[t for t in ticks if low <= t <= high], grid=True,
                    labelExpr="format(datum.value, datum.value < 0.001 ? '.0e' : ',~r') + '×'")


def ratio_scale(ratios: pd.Series) -> dict:
    """The scale and axis of a ratio channel: log, symmetric about 1."""
    domain = ratio_domain(ratios)
    return dict(scale=alt.Scale(type="log", domain=domain, nice=False), axis=ratio_axis(domain))


RATIO_RULE_TEXT = "reference: a ratio of 1 (equal times)"


def ratio_rule(orient: str = "x") -> alt.Chart:
    """The reference rule at a ratio of 1 (equal times), drawn once (once a panel) over the chart's data; its
    description is the rule's aria-label in the rendered SVG."""
    return alt.Chart().mark_rule(color="#333", strokeWidth=1.5).encode(
        **{orient: alt.datum(1.0)}, tooltip=alt.TooltipValue(RATIO_RULE_TEXT),
        description=alt.DescriptionValue(RATIO_RULE_TEXT)).transform_aggregate(rows="count()")


def ratio_dots(data: pd.DataFrame, *, label: str = "label", ratio: str = "ratio", title: str, x_title: str,
               tooltip=()) -> alt.LayerChart:
    """A ratio per row of `data` as a dot: one row of dots per `label` (a category), the ratio along a log
    axis symmetric about 1 with a reference rule at 1, the dots of one label apart by `series` (legend text).
    `source` (measured, published, predicted) decides the mark: measured filled, published hollow,
    predicted hollow with a dotted outline (and a measured dot with a `quality`, noisy or a single sample,
    hollow). With a `variant` column the colour is the variant's fixed colour, else it follows `series`.
    `lo`/`hi`, when given, are drawn as the ratio's error bar."""
    missing = [c for c in (label, ratio, "source", "series") if c not in data.columns]
    if missing:
        raise ValueError(f"ratio_dots needs the column(s) {', '.join(missing)}")
    return category_dots(data, label, ratio, title=title, x_title=x_title, ratio=True, tooltip=tooltip)


def category_dots(data: pd.DataFrame, label: str, value: str, *, title: str, x_title: str, ratio: bool = False,
                  log: bool = True, tooltip=()) -> alt.TopLevelMixin:
    """A figure per row of `data` as a dot: one row of dots per `label`, the dots of a label apart by
    `series`; drawn by source (see ratio_dots), shaped by `device` when there is one; `lo`/`hi` as error
    bars. `ratio`: on a log axis symmetric about 1 with a rule at 1; else on a log axis (`log`) or a linear
    one from zero. With more than one run, one panel per run."""
    data = with_look(_prepared(data, [value, "lo", "hi"], None))
    data = data[data[value] > 0] if ratio or log else data[data[value].notna()]
    runs = runs_drawn(data)
    data = _per_panel(data, runs)
    by_variant = data["variant"].notna().all() and len(data)
    colour = (variant_color(data["variant"], symbol=SWATCH) if by_variant else
              alt.Color("series:N", title="series", scale=_series_scale(data),
                        legend=alt.Legend(labelLimit=0, symbolType=SWATCH, symbolOpacity=1)))
    x_scale = (ratio_scale(data[value]) if ratio else
               {"scale": alt.Scale(type="log") if log else alt.Scale(zero=True)})
    shapes = {}
    if data["device"].notna().all() and len(data):
        data = data.assign(device=data["device"].map(device_label))
        shapes = {"shape": device_shape(data["device"])}
    symbol = _symbol(set(data["device"])) if shapes else "circle"
    base = alt.Chart().encode(y=alt.Y(f"{label}:N", title=None, sort=list(dict.fromkeys(data[label])),
                                      axis=alt.Axis(labelLimit=0)),
                              yOffset=alt.YOffset("series:N"), color=colour)
    tip = [alt.Tooltip(f"{label}:N"), _value_tooltip(value, x_title), alt.Tooltip("series:N"), *BASE_TOOLTIP,
           *tooltips(tooltip)]
    layers = [ratio_rule("x")] if ratio else []
    layers += [
        base.mark_rule(strokeWidth=1.5).encode(x=alt.X("lo:Q", title=x_title, **x_scale), x2=alt.X2("hi:Q"))
        .transform_filter("isValid(datum.lo) && isValid(datum.hi)"),
        base.mark_point(strokeWidth=2, opacity=1).encode(
            x=alt.X(f"{value}:Q", title=x_title, **x_scale), size=POINT_SIZE, **shapes, **fill_where_filled(colour),
            **look_encoding(data["look"], symbol), tooltip=tip),
    ]
    return _panels(layers, data, runs, title, columns=1, height=_rows_height(data, label, "series", 18), width=420)


def _series_scale(data: pd.DataFrame) -> alt.Scale:
    """Series coloured in the order of their source (published, predicted, measured): a new measured series
    never recolours the published and predicted ones."""
    order = {"published": 0, "predicted": 1, "measured": 2}
    series = (data[["series", "source"]].drop_duplicates("series")
              .assign(rank=lambda d: d["source"].map(order)).sort_values("rank", kind="stable")["series"])
    return alt.Scale(domain=list(series), range=_cycle(list(VARIANT_PALETTE), len(series)))


def _rows_height(data: pd.DataFrame, label: str, group: str, each: int) -> int:
    """The height of a chart of rows of `label` holding `each` pixels per `group` in a row; at least that of
    the legends beside it (variant, device, source), which the chart's frame would otherwise cut off."""
    legends = sum(30 + 21 * data[column].nunique() for column in ("variant", "device", "look")
                  if data[column].notna().any())
    label_lines = data[label].astype(str).str.count(" · ").max() + 1 if len(data) else 1   # zero_bars breaks them
    row = max(data[group].nunique() * each, label_lines * 13 + 8)
    return max(legends, data[label].nunique() * row + 20)


# -- bars: only where zero means something ------------------------------------------------------------------
def zero_bars(data: pd.DataFrame, category: str, value: str, *, title: str, x_title: str, y_title: str,
              group: str = "series", sort: list = None, text: str = None, tooltip=()) -> alt.TopLevelMixin:
    """Horizontal bars of `value` per `category` (a row each, its label in full, ' · ' breaking it into lines)
    on an axis that starts at zero, one bar per `group` in a row; coloured by variant and drawn by source
    (measured filled, published and noisy ones hollow, outlined) with `lo`/`hi` as error bars. `y_title`
    names the value's axis (it runs across), `x_title` the categories (None for none); `text`, a column
    written after each bar ("published", say). With more than one run, one panel per run."""
    data = with_look(_prepared(data, [value, "lo", "hi"], None))
    data = data[data[value].notna()]
    runs = runs_drawn(data)
    data = _per_panel(data, runs)
    scale = variant_scale(data["variant"])
    axis = alt.Axis(labelLimit=0, labelExpr="split(datum.label, ' · ')")
    base = alt.Chart().encode(
        y=alt.Y(f"{category}:N", title=x_title, sort=sort or list(dict.fromkeys(data[category])), axis=axis),
        yOffset=alt.YOffset(f"{group}:N"))
    tip = [alt.Tooltip(f"{category}:N"), _value_tooltip(value, y_title), alt.Tooltip(f"{group}:N"),
           *BASE_TOOLTIP, *tooltips(tooltip)]
    legend = alt.Legend(title="variant", labelLimit=0, symbolType="square", symbolOpacity=1)
    layers = [
        base.mark_bar(strokeWidth=2).encode(
            x=alt.X(f"{value}:Q", title=y_title, scale=alt.Scale(zero=True), stack=None),
            fill=alt.Fill("variant:N", scale=scale, legend=legend),
            fillOpacity=FILLED,
            stroke=alt.Stroke("variant:N", scale=scale, legend=None),
            **look_encoding(data["look"], "square"), tooltip=tip),
        base.mark_rule(strokeWidth=1.5, color="#333").encode(x=alt.X("lo:Q"), x2=alt.X2("hi:Q")).transform_filter(
            "isValid(datum.lo) && isValid(datum.hi)"),
    ]
    if text:
        layers.append(base.mark_text(align="left", dx=4, fontSize=11, color="#333").encode(
            x=alt.X("end:Q"), text=alt.Text(f"{text}:N")).transform_calculate(
            end=f"isValid(datum.hi) ? max(datum.hi, datum['{value}']) : datum['{value}']"))
    return _panels(layers, data, runs, title, columns=1, height=_rows_height(data, category, group, 16), width=420)


def measured_lines(rows: pd.DataFrame, x: str, y: str, *, title: str, x_title: str, y_title: str,
                   log_x: bool = True, log_y: bool = True, tooltip=(), spread: str = "time",
                   figures: pd.DataFrame = None, line: str = None) -> alt.TopLevelMixin:
    """The measured `y` of `rows` against `x` (see `lines`), with the write-up's `figures` (already carrying
    `x` and `y` columns) beside them."""
    data = measured(rows, y, spread=spread)
    if figures is not None and len(figures):
        data = pd.concat([data, published(figures, y)], ignore_index=True)
    return lines(data, x, y, title=title, x_title=x_title, y_title=y_title, log_x=log_x, log_y=log_y, line=line,
                 tooltip=tooltip)


def series_label(rows: pd.DataFrame) -> pd.Series:
    """'variant · device (machine)', for text that names a series of one run."""
    return rows["variant"] + " · " + rows["device"] + " (" + rows["machine"].map(runs.machine_text) + ")"


# -- where the time goes: the measured parts of one unit ----------------------------------------------------
# The parts of a measured breakdown, in stacking order, with a fixed colour each.
PART_COLOURS = {"compute": "#4c78a8", "copies": "#f58518", "sync": "#e45756", "loading": "#72b7b2",
                "host": "#b9b9b9"}
TIME_PARTS = {part: (breakdown.LABELS[part], PART_COLOURS[part]) for part in breakdown.PARTS}


def where_time_goes(rows: pd.DataFrame, counts: pd.Series, unit: str) -> alt.Chart:
    """One bar per row (a device and variant of one configuration), split into the measured parts of
    one `unit`, on an axis that starts at zero; each bar's label carries its `counts` (same index)."""
    names = series_label(rows)
    if rows["run_id"].nunique() > 1:  # the run's label names its machine: the series' would say it again
        names = rows["variant"] + " · " + rows["device"] + " · " + run_label(rows)
    bars = rows.assign(bar=names + "\n" + counts.reindex(rows.index).fillna(""),
                       per_call=rows["per_call"].fillna(1))
    scale_name, factor = time_unit(results.per_unit(rows["median_s"], rows["per_call"]).max())
    long = bars.melt(id_vars=["bar", "per_call", "median_s"], value_vars=[f"time_{p}_s" for p in TIME_PARTS],
                     var_name="part", value_name="seconds")
    long["part"] = long["part"].str.removeprefix("time_").str.removesuffix("_s").map(lambda p: TIME_PARTS[p][0])
    long["time"] = results.per_unit(long["seconds"], long["per_call"]) * factor
    long["share"] = long["seconds"] / long["median_s"]
    long["order"] = long["part"].map({label: i for i, (label, _) in enumerate(TIME_PARTS.values())})
    labels, colours = zip(*TIME_PARTS.values())
    return alt.Chart(long[["bar", "part", "time", "share", "order"]]).mark_bar().encode(
        x=alt.X("time:Q", title=f"{scale_name} per {unit}", scale=alt.Scale(zero=True), stack="zero"),
        y=alt.Y("bar:N", title=None, sort=list(bars["bar"]),
                axis=alt.Axis(labelLimit=0, labelExpr="split(datum.label, '\\n')")),
        order="order:Q",
        # one column under the bars: beside long bar labels a second column ran past the page's edge, hiding parts
        color=alt.Color("part:N", title="part", scale=alt.Scale(domain=list(labels), range=list(colours)),
                        legend=alt.Legend(orient="bottom", columns=1, labelLimit=0, symbolType="square")),
        tooltip=["bar", "part", alt.Tooltip("time:Q", title=scale_name, format=".3~g"),
                 alt.Tooltip("share:Q", format=".0%")],
    ).properties(height=alt.Step(46))


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit an axis of times up to `seconds` reads best in, and its factor from seconds."""
    if seconds < 1e-3:
        return "microseconds", 1e6
    return ("milliseconds", 1e3) if seconds < 1 else ("seconds", 1.0)


# -- measured against predicted (the cost model's pages) ----------------------------------------------------
# Measured series solid with filled points; predicted ones dotted with hollow points, the first grey.
MEASURED_COLOURS = ["#4c78a8", "#72b7b2", "#54a24b"]
PREDICTED_COLOURS = ["#7f7f7f", "#e45756", "#b279a2", "#f58518", "#9d755d", "#eeca3b", "#ff9da6", "#bab0ac",
                     "#d67195", "#439894"]


# Seconds labelled in the unit that reads best at each tick ("500 ns", "2 µs", "10 ms"), where Vega's own format
# writes a log axis's small values as "0.000001" and then "1e-7"; the ticks Vega leaves unlabelled stay so
SECONDS_LABELS = ("datum.label == '' ? ''"
                  " : datum.value >= 1 ? format(datum.value, '.3~g') + ' s'"
                  " : datum.value >= 1e-3 ? format(datum.value * 1e3, '.3~g') + ' ms'"
                  " : datum.value >= 1e-6 ? format(datum.value * 1e6, '.3~g') + ' µs'"
                  " : format(datum.value * 1e9, '.3~g') + ' ns'")


def measured_and_predicted(data: pd.DataFrame, x: str, *, title: str, x_title: str, y_title: str,
                           facet: str = None, tooltip: list[str] = (), marks: tuple = ()) -> alt.TopLevelMixin:
    """Seconds per unit (`per_unit_s`) against `x`: one line per `series` (its legend label) and `line`
    (the other swept parameters, told apart by the points' shape). A series with `predicted` true is
    drawn dotted with hollow points so that it can never pass for a measurement; the source legend says
    so; where its rows carry their likely range (fast_edge, slow_edge: the model's error) it is shaded. Axes are
    logarithmic where the values span a decade or more. With `facet`, one panel per value of that column; `marks`,
    charts of their own data drawn over the lines (rules at a crossover, say)."""
    data = data[data[x].notna() & (data["per_unit_s"] > 0)]
    data = with_look(data.assign(source=data["predicted"].map({True: "predicted", False: "measured"})))
    measured_series = list(dict.fromkeys(data.loc[~data["predicted"], "series"]))
    predicted_series = list(dict.fromkeys(data.loc[data["predicted"], "series"]))
    colours = alt.Scale(domain=measured_series + predicted_series,
                        range=_cycle(MEASURED_COLOURS, len(measured_series))
                        + _cycle(PREDICTED_COLOURS, len(predicted_series)))
    colour = alt.Color("series:N", title=None, scale=colours,
                       legend=alt.Legend(orient="bottom", columns=1, labelLimit=0, symbolType="stroke",
                                         symbolStrokeWidth=3))
    encoding = dict(
        x=alt.X(f"{x}:Q", title=x_title, scale=_spanning(data[x]), axis=_ticks_at(data[x])),
        y=alt.Y("per_unit_s:Q", title=y_title, scale=_spanning(data["per_unit_s"]),
                axis=alt.Axis(labelExpr=SECONDS_LABELS)),
        color=colour, detail="line:N",
        tooltip=["series", "source", x, alt.Tooltip("per_unit_s:Q", title="seconds per unit", format=".3~g"),
                 *tooltip])
    several = data["line"].nunique() > 1
    shape = alt.Shape("line:N", title="configuration", legend=alt.Legend(orient="bottom", columns=1, labelLimit=0)
                      if several else None)
    base = alt.Chart().encode(**encoding)
    fast, slow = (data.get(edge, pd.Series(1.0, data.index)).fillna(1.0) for edge in ("fast_edge", "slow_edge"))
    ranged = (data["predicted"] & fast.ne(1.0)).any()
    if ranged:  # the likely range of each predicted time: its model error on such points
        data = data.assign(likely_low_s=data["per_unit_s"] * fast, likely_high_s=data["per_unit_s"] * slow)
    band = base.mark_area(opacity=0.12).encode(
        y="likely_low_s:Q", y2="likely_high_s:Q",
        tooltip=["series", alt.Tooltip("likely_low_s:Q", title="likely from (s per unit)", format=".3~g"),
                 alt.Tooltip("likely_high_s:Q", title="likely to (s per unit)", format=".3~g")],
    ).transform_filter("datum.source == 'predicted'")
    layers = alt.layer(
        *([band] if ranged else []),
        base.mark_line().transform_filter("datum.source == 'measured'"),
        base.mark_line(strokeDash=[2, 2]).transform_filter("datum.source == 'predicted'"),
        base.mark_point(size=70, strokeWidth=2, opacity=1).encode(
            shape=shape, **fill_where_filled(colour), **look_encoding(data["look"], orient="top")),
        *marks, data=data)
    if facet:  # two panels a row, sized to sit side by side in the page's column
        return layers.properties(width=330, height=240).facet(
            facet=alt.Facet(f"{facet}:N", title=None), columns=2).properties(title=title)
    return layers.properties(title=title, height=CHART_HEIGHT, autosize=FIT_WIDTH)


def _spanning(values: pd.Series) -> alt.Scale:
    """Logarithmic where positive values span a decade or more (symlog when zero is among them)."""
    values = values.dropna()
    positive = values[values > 0]
    if len(positive) < 2 or positive.max() / positive.min() < 10 or (values < 0).any():
        return alt.Scale(zero=False)
    return alt.Scale(type="symlog") if (values == 0).any() else alt.Scale(type="log")


def _ticks_at(values: pd.Series, most: int = 12) -> alt.Axis:
    """Ticks at the swept values themselves when they are few (a log or symlog axis would label few of them)."""
    swept = sorted(pd.to_numeric(values, errors="coerce").dropna().unique())
    return alt.Axis(values=[float(v) for v in swept]) if 0 < len(swept) <= most else alt.Axis()


def _cycle(colours: list[str], count: int) -> list[str]:
    return [colours[i % len(colours)] for i in range(count)]
