"""Analysis shared by every experiment, pure pandas over the rows frame (core.store.results.rows_frame):
which points to compare, CPU-accelerator pairs, speedups, crossovers, and claims with their verdicts.

The pairing rule: a point on an accelerator is compared with the same point (variant and swept
parameters) on the CPU of the same machine, measured with the same configuration, taking each from
the latest complete run unless a run is chosen. The CPU's baseline is the write-up's, torch's default
intra-op threads; where other thread settings were measured, the fastest of them is carried beside it
(`cpu_best_*`), so a verdict can name both.

A claim's figure carries its 95% confidence interval (core.present.stats); a claim whose interval
straddles its threshold is too close to call, whatever side its median falls on."""
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from core import devices, settings
from core.present import stats
from core.present.stats import Interval
from core.store import results
from core.store.record_schema import DEFAULT_THREADS

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
TOO_CLOSE = "too close to call"
EDGES = ("fast_edge", "slow_edge")  # a predicted row's multipliers to the ends of its likely range (its model error)
ESTIMATED = "estimated"
NEEDS_GPU = "needs a GPU to tell"
NO_DATA = "no data yet"

POINT_KEYS = ["machine_id", "config_id", "variant", "point"]   # one point of one configuration on a machine


# -- which rows ---------------------------------------------------------------------------------------
def ok(rows: pd.DataFrame) -> pd.DataFrame:
    """The measured points (not skipped, failed or out of memory)."""
    return rows[rows["point_status"] == "ok"] if len(rows) else rows


def on_accelerator(rows: pd.DataFrame) -> pd.Series:
    return rows["device"].map(devices.is_accelerator).astype(bool)


def latest(rows: pd.DataFrame, run_id: str = None, every_threads: bool = False) -> pd.DataFrame:
    """The measured points to compare: those of `run_id` when a run is chosen, else, for every point
    and device, the one from the latest complete run of its machine and configuration. CPU points are
    those at torch's default threads (the write-up's baseline) unless `every_threads`."""
    data = ok(rows)
    keys = [*POINT_KEYS, "threads_setting"] if "threads_setting" in data else POINT_KEYS
    data = data[data["run_id"] == run_id] if run_id else results.latest_complete_rows(data, keys)
    return data if every_threads else at_default_threads(data)


def at_default_threads(data: pd.DataFrame) -> pd.DataFrame:
    """One row per point and device: a CPU point's at torch's default intra-op threads (the write-up's baseline),
    else at the first setting it was measured at (a run that swept no threads has only that one)."""
    if "threads_setting" not in data or data.empty:
        return data
    other = data["threads_setting"].fillna(DEFAULT_THREADS) != DEFAULT_THREADS
    if not other.any():
        return data
    keys = [k for k in [*POINT_KEYS, "device"] if k in data]
    ranked = data.loc[other.sort_values(kind="stable").index, keys]  # the default's row first, then the others
    return data[~ranked.duplicated().reindex(data.index)]


def pair(rows: pd.DataFrame, values: tuple[str, ...] = ("median_s",), run_id: str = None) -> pd.DataFrame:
    """Every accelerator point beside the same point on its machine's CPU: the accelerator row's
    columns plus `cpu_<value>` for each of `values` (and the samples), at the CPU's default threads,
    and `cpu_best_<value>` at the CPU's fastest thread setting measured."""
    return beside_cpu(latest(rows, run_id, every_threads=True), values)


def beside_cpu(data: pd.DataFrame, values: tuple[str, ...], keys: list[str] = POINT_KEYS) -> pd.DataFrame:
    """The pairing step on any frame of chosen figures: each accelerator row beside the CPU row with the
    same `keys` at default threads (`cpu_<value>` for each of `values`, the samples and `cpu_torch_threads`)
    and the fastest CPU row by the first value (`cpu_best_<value>`, `cpu_best_samples_s`, `cpu_best_torch_threads`)."""
    carried = [*values, *(c for c in ("samples_s", "torch_threads", "threads_setting") if c in data and c not in values)]
    named = [f"cpu_{v}" for v in carried] + [f"cpu_best_{v}" for v in carried] + ["cpu_thread_settings"]
    if data.empty or not set(values) <= set(data.columns):  # nothing measured, or no point has these figures
        return data.iloc[0:0].assign(**{c: [] for c in named})
    cpu = data.loc[data["device"] == "cpu", list(dict.fromkeys([*keys, "device", *carried]))]
    default = at_default_threads(cpu)[[*keys, *carried]].rename(columns={v: f"cpu_{v}" for v in carried})
    ranked = cpu.sort_values(values[0], kind="stable")
    fastest = ranked[~ranked[keys].duplicated().to_numpy()][[*keys, *carried]]
    fastest = fastest.rename(columns={v: f"cpu_best_{v}" for v in carried}).merge(
        cpu.groupby(keys).size().rename("cpu_thread_settings").reset_index(), on=keys)
    return at_default_threads(data[on_accelerator(data)]).merge(default.merge(fastest, on=keys), on=keys)


def speedups(rows: pd.DataFrame, value: str = "median_s", run_id: str = None) -> pd.DataFrame:
    """CPU time / accelerator time (`speedup`, above 1: the accelerator is faster) for every pair."""
    paired = pair(rows, (value,), run_id)
    return paired.assign(speedup=paired[f"cpu_{value}"] / paired[value],
                         best_speedup=paired[f"cpu_best_{value}"] / paired[value])


def relative_to(rows: pd.DataFrame, baseline: str, value: str = "median_s", *, same_device: bool = True,
                run_id: str = None) -> pd.DataFrame:
    """Every point of another variant beside the `baseline` variant's same point (on the same device,
    or anywhere on the machine): `baseline_<value>` (and `baseline_samples_s`, for intervals) and `gain` =
    baseline / this (above 1: faster)."""
    data = latest(rows, run_id)
    if value not in data.columns:
        return data.iloc[0:0].assign(**{f"baseline_{value}": [], "gain": []})
    keys = ["machine_id", "config_id", "point", *(["device"] if same_device else [])]
    carried = [value, *(["samples_s"] if "samples_s" in data and value != "samples_s" else [])]
    base = data[data["variant"] == baseline][[*keys, *carried]].rename(columns={c: f"baseline_{c}" for c in carried})
    out = data[data["variant"] != baseline].merge(base, on=keys)
    return out.assign(gain=out[f"baseline_{value}"] / out[value])


def with_interval(pairs: pd.DataFrame, top: str = "cpu_median_s", bottom: str = "median_s",
                  name: str = "speedup") -> pd.DataFrame:
    """Each pair's `top` / `bottom` with its 95% interval from the two rows' samples (core.present.stats):
    columns `<name>`, `<name>_ci` ('2.31–2.52x')."""
    found = [stats.ratio(pairs.iloc[[i]], top, bottom) for i in range(len(pairs))]
    return pairs.assign(**{name: [f.value for f in found],
                           f"{name}_ci": [f"{f.low:.2f}–{f.high:.2f}x" for f in found]})


def crossovers(frame: pd.DataFrame, x: str, by: list[str], value: str = "speedup") -> pd.DataFrame:
    """Per group: the smallest `x` from which `value` is above 1 at every larger `x` measured (None when
    it never is), with the range of `x` compared. Repeated figures at one `x` count by their median."""
    out = []
    for key, part in frame.groupby(by, dropna=False):
        per_x = part.groupby(x)[value].median().sort_index()
        wins = list(per_x > 1)
        first = next((s for i, s in enumerate(per_x.index) if all(wins[i:])), None)
        out.append({**dict(zip(by, key)), "crossover": first, "compared": len(per_x),
                    "smallest": per_x.index[0], "largest": per_x.index[-1]})
    return pd.DataFrame(out, columns=[*by, "crossover", "compared", "smallest", "largest"])


# -- claims and verdicts --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    claim: str
    outcome: str
    evidence: str
    basis: str = ""      # what it rests on: "measured", "estimated", or "" when nothing was found
    prediction: str = ""  # where no GPU measured: the claim checked on predicted GPU rows, said as such
    published: str = ""  # the published figures the claim refers to, short (published_short)
    finding: str = ""    # what the check found (or why it could not), without the criterion or published text
    leaning: str = ""    # with a prediction: the outcome it leans to (REPRODUCED or NOT_REPRODUCED)
    interval: str = ""   # the figure decided on with its 95% confidence interval, or why it has none


@dataclass(frozen=True)
class Finding:
    """What a claim's check found: whether the claim holds, the figures that say so, and whether any of
    them is extrapolated or fitted rather than measured. A timing claim gives the figure it decides on as
    an `interval` (core.present.stats) and the `thresholds` its criterion compares it with; one that counts
    or compares values without samples (a hook's calls, a loss) says why it has no interval in `exact`."""
    holds: bool
    evidence: str
    estimated: bool = False
    interval: Interval | None = None
    thresholds: tuple[float, ...] = ()
    form: str = "{:.2f}x"
    exact: str = ""

    def too_close(self) -> float | None:
        """The threshold the interval straddles, if any."""
        if self.interval is None:
            return None
        return next((t for t in self.thresholds if self.interval.straddles(t)), None)

    def interval_text(self) -> str:
        if self.interval is not None:
            return self.interval.text(self.form)
        return self.exact or "no interval: not computed from timing samples"


class NoFinding(Exception):
    """A claim cannot be checked from these rows; `outcome` is NO_DATA or NEEDS_GPU."""
    def __init__(self, outcome: str, reason: str):
        super().__init__(reason)
        self.outcome = outcome


@dataclass(frozen=True)
class Claim:
    """A write-up's claim: its text, the published figures it refers to (ids or figure names in
    core/published.json), what reproducing it means, and the check that decides it from the rows and
    those figures (returning a Finding, or raising NoFinding)."""
    text: str
    check: Callable[[pd.DataFrame, pd.DataFrame], Finding]
    criterion: str = ""
    figures: tuple[str, ...] = ()
    predictable: bool = True  # a claim on time alone, which predicted GPU rows can answer (not losses, surfaces)


def evaluate(claim: Claim, rows: pd.DataFrame, published: pd.DataFrame, predicted: pd.DataFrame = None,
             accuracy: str = "") -> Verdict:
    """The claim checked on the measured rows. Where they cannot tell (no GPU measured, or none beside its
    machine's CPU) and `predicted` holds predicted GPU rows (core.predict.predictions), the same check on the measured
    rows with them gives the verdict's `prediction`, with `accuracy` (the model's own, where it was checked)
    quoted."""
    figures = referenced(claim, published)
    stated, short = published_text(figures), published_short(figures)
    if ok(rows).empty:
        missing = "No measured results yet: run this experiment."
        return Verdict(claim.text, NO_DATA, _join(missing, stated), published=short, finding=missing)
    try:
        found = claim.check(rows, figures)
    except NoFinding as missing:
        guess, leaning = _predicted_answer(claim, rows, predicted, figures, accuracy)  # what the model says instead
        return Verdict(claim.text, missing.outcome, _join(str(missing), stated), prediction=guess, published=short,
                       finding=str(missing), leaning=leaning)
    interval = found.interval_text()
    if found.estimated:
        leaning = REPRODUCED if found.holds else NOT_REPRODUCED
        evidence = f"Rests on an estimate, not a measurement: if it holds, the claim is {leaning}. {found.evidence}"
        return Verdict(claim.text, ESTIMATED, _join(evidence, claim.criterion, stated), "estimated", published=short,
                       finding=found.evidence, interval=interval)
    straddled = found.too_close()
    if straddled is not None:
        why = (f"Too close to call: the 95% interval of the figure decided on, {interval}, straddles the "
               f"threshold {found.form.format(straddled)}; a rerun could fall on either side.")
        return Verdict(claim.text, TOO_CLOSE, _join(why, found.evidence, claim.criterion, stated), "measured",
                       published=short, finding=_join(why, found.evidence), interval=interval)
    outcome = REPRODUCED if found.holds else NOT_REPRODUCED
    return Verdict(claim.text, outcome, _join(found.evidence, f"Decided on {interval}.", claim.criterion, stated),
                   "measured", published=short, finding=found.evidence, interval=interval)


def _predicted_answer(claim: Claim, rows: pd.DataFrame, predicted: pd.DataFrame | None, figures: pd.DataFrame,
                      accuracy: str) -> tuple[str, str]:
    """'Predicted on <GPU> (not measured): the claim would be ...' and the outcome it leans to, or ('', '')
    when the predicted rows cannot answer the claim (it needs a figure a prediction has not: a loss, a
    warm-up time)."""
    if predicted is None or predicted.empty or not claim.predictable:
        return "", ""
    # the answer is whether the claim would hold, never a measured interval: without the samples the checks skip the
    # bootstrap (three checks a claim)
    measured = rows.drop(columns=[c for c in rows.columns if c.endswith("samples_s")])
    try:
        found, *ends = (claim.check(pd.concat([measured, frame], ignore_index=True), figures)
                        for frame in (predicted, *_at_edges(predicted)))
    except (NoFinding, KeyError, ValueError, TypeError, IndexError):
        return "", ""
    where = _predicted_on(predicted)
    model = f"The model on {settings.this_host()}: {accuracy}." if accuracy else ""
    if len({end.holds for end in ends}) > 1:
        fast, slow = ("would" if end.holds else "would not" for end in ends)
        return _join(f"Predicted on {where} (a model, not a measurement): too close to call by the model's error. At "
                     f"the fast end of the predicted times' likely range the claim {fast} be reproduced, at the slow "
                     f"end it {slow}.", found.evidence, model), TOO_CLOSE
    would = "would" if found.holds else "would not"
    across = ", across the predicted times' likely range" if ends else ""
    return (_join(f"Predicted on {where} (a model, not a measurement): the claim {would} be reproduced{across}.",
                  found.evidence, model), REPRODUCED if found.holds else NOT_REPRODUCED)


def _at_edges(predicted: pd.DataFrame) -> list[pd.DataFrame]:
    """The predicted rows with every time at the fast, then the slow, end of its likely range (its `fast_edge` and
    `slow_edge` multipliers: the model's measured error on such points); none where the rows carry no range."""
    if not set(EDGES) <= set(predicted.columns) or (predicted[list(EDGES)] == 1).all().all():
        return []
    times = [column for column in predicted.columns if column in ("median_s", "per_unit_s")
             or (column.startswith("time_") and column.endswith("_s"))]
    return [predicted.assign(**{column: predicted[column] * predicted[edge] for column in times}) for edge in EDGES]


def _predicted_on(predicted: pd.DataFrame) -> str:
    """The hardware predicted rows ran on: 'T4 driven by this machine's CPU'; where runs' GPUs were driven by several
    CPUs (core.predict.predictions.driven_rows: each run's own machine's where it is calibrated), the GPU and that rule."""
    targets = list(dict.fromkeys(predicted["hardware"].dropna()))
    gpus = list(dict.fromkeys(predicted["device_name"].dropna().str.removesuffix(" (predicted)")))
    if len(targets) < 2 or len(gpus) != 1:
        return " / ".join(targets)
    return (f"{gpus[0]}, each run's driven by its own machine's CPU where that machine is calibrated, else by "
            f"{settings.this_host()}'s")


def referenced(claim: Claim, published: pd.DataFrame) -> pd.DataFrame:
    """The published rows a claim refers to; a reference that names nothing is a mistake in the claim."""
    if not claim.figures:
        return published.iloc[0:0]
    chosen = published["id"].isin(claim.figures) | published["figure"].isin(claim.figures)
    found = set(published.loc[chosen, "id"]) | set(published.loc[chosen, "figure"])
    unknown = [f for f in claim.figures if f not in found]
    if unknown:
        raise KeyError(f"claim '{claim.text}' refers to unknown published figure(s) {unknown}")
    return published[chosen]


def published_text(figures: pd.DataFrame) -> str:
    """'Published (source title; hardware): CPU <value> <unit>, GPU <value> <unit> (<params>).'"""
    if figures.empty:
        return ""
    each = ", ".join(f"{r['device']} {_value(r)}{_qualifier(r)}" for _, r in figures.iterrows())
    hardware = "; ".join(dict.fromkeys(figures["hardware"]))
    return f"Published ({figures['source_title'].iloc[0]}; {hardware}): {each}."


def published_short(figures: pd.DataFrame) -> str:
    """The published figures, short: 'CPU 11.1 s, GPU 19.5 s (val 100)'; over more than two settings, each
    device's range: 'CPU 162–2,002 s, GPU 106–1,620 s (batch_size 16–4096)'."""
    if figures.empty:
        return ""
    figures = figures.sort_values("device", key=lambda d: d != "CPU", kind="stable")  # the CPU's figure first
    settings = figures.apply(_qualifier, axis=1)
    groups = list(dict.fromkeys(settings))
    if len(groups) <= 2:
        return "; ".join(", ".join(f"{r['device']} {_short_value(r['value'], r['unit'])}"
                                   for _, r in figures[settings == g].iterrows()) + g for g in groups)
    ranges = ", ".join(f"{device} {_short_range(part)}" for device, part in figures.groupby("device", sort=False))
    swept = [f"{k} {figures[k].min():g}–{figures[k].max():g}" for k in QUALIFIERS
             if k in figures and pd.api.types.is_numeric_dtype(figures[k]) and figures[k].nunique() > 1]
    return f"{ranges} ({', '.join(swept) or f'{len(groups)} settings'})"


def _short_range(part: pd.DataFrame) -> str:
    units = part["unit"].unique()
    low, high = part["value"].min(), part["value"].max()
    if len(units) > 1:
        return ", ".join(_short_value(r["value"], r["unit"]) for _, r in part.iterrows())
    if low == high:
        return _short_value(low, units[0])
    return f"{_short_number(low)}–{_short_value(high, units[0])}"


def _short_value(value: float, unit: str) -> str:
    return f"{_short_number(value)}x" if unit == "x" else f"{_short_number(value)} {unit}"


def _short_number(value: float) -> str:
    """Three significant digits, whole numbers from 100 up, with thousands separated: '0.002', '11.3', '1,620'."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def require(found: pd.DataFrame, rows: pd.DataFrame, context: str = "") -> pd.DataFrame:
    """`found` (pairs or points a claim needs), or NoFinding saying why there are none: no accelerator
    results at all (needs a GPU), or none that fit the claim (no data yet), naming each machine that measured
    one side without the other: a verdict pairs points of one machine, never across machines."""
    if len(found):
        return found
    if not on_accelerator(ok(rows)).any():
        raise NoFinding(NEEDS_GPU, _join("No GPU results on any machine yet: run this experiment on a machine "
                                         "with a GPU (it times the CPU as well).", context))
    raise NoFinding(NO_DATA, _join(missing_sides(rows), "No machine has measured what this claim needs on both its CPU "
                                   "and a GPU with the same configuration yet.", context))


def missing_sides(rows: pd.DataFrame) -> str:
    """'On <machine>, the GPU was measured without its CPU (run it there with --device cpu).' for each machine
    whose latest runs measured one side only, with any configuration."""
    data = latest(rows)
    said = []
    for machine, part in data.groupby("machine", sort=True):
        gpu = on_accelerator(part)
        if gpu.all():
            said.append(f"On {machine}, a GPU was measured without that machine's CPU: run it there on the CPU too "
                        f"(--device cpu).")
        elif not gpu.any() and on_accelerator(ok(rows)[ok(rows)["machine"] == machine]).any():
            said.append(f"On {machine}, the CPU's latest runs have no GPU beside them.")
    return " ".join(said)


def cpu_baselines(pairs: pd.DataFrame, value: str = "median_s") -> str:
    """Both CPU baselines of GPU/CPU pairs (core.present.analysis.pair), median over the pairs with their
    intervals: 'Against this CPU at its default 16 threads the GPU is 2.30x faster (95% CI ...); against its
    fastest thread setting measured (2 threads) 1.10x slower (95% CI ...).' Says so where only the default
    threads were measured, or where they were the fastest."""
    if pairs.empty or f"cpu_best_{value}" not in pairs:
        return ""
    default = stats.ratio(pairs, f"cpu_{value}", value)
    threads = _threads_text(pairs.get("cpu_torch_threads"))
    setting = set(pairs.get("cpu_threads_setting", pd.Series([DEFAULT_THREADS])).fillna(DEFAULT_THREADS))
    which = f"torch's default {threads}" if setting == {DEFAULT_THREADS} else threads
    first = f"Against the CPU of its machine at {which} the GPU is {_faster(default)}"
    if (pairs[f"cpu_best_{value}"] == pairs[f"cpu_{value}"]).all():
        if (pairs["cpu_thread_settings"] > 1).any():
            return f"{first}; no other thread setting measured made that CPU faster. {gpu_precision(pairs)}"
        return f"{first}; only the default threads were measured on that CPU. {gpu_precision(pairs)}"
    best = stats.ratio(pairs, f"cpu_best_{value}", value)
    return (f"{first}; against that CPU at its fastest thread setting measured "
            f"({_threads_text(pairs.get('cpu_best_torch_threads'))}) {_faster(best)}. {gpu_precision(pairs)}")


def gpu_precision(pairs: pd.DataFrame) -> str:
    """What precision the GPU's rows ran in, as recorded (runs before it was recorded ran with cuDNN's default)."""
    tf32 = pairs["tf32_cudnn"] if "tf32_cudnn" in pairs else pd.Series([None] * len(pairs), dtype=object)
    if tf32.isna().any():
        return ("Some of these GPU runs predate precision control: cuDNN's default then allowed TF32 in any "
                "convolution or recurrent layer they ran (matrix products stayed in FP32, torch's default), against "
                "FP32 on the CPU.")
    if tf32.astype(bool).any():
        return "The GPU was allowed TF32 (a tuned variant that says so), against FP32 on the CPU."
    return "The GPU ran in FP32 (TF32 off, cuDNN's benchmark off), as the CPU did."


def _faster(ratio: Interval) -> str:
    """'2.30x faster (95% CI 2.1–2.5)' for CPU time / GPU time above 1, else '1.10x slower (...)'."""
    if ratio.value >= 1:
        return f"{ratio.text()} faster"
    return f"{ratio.inverse().text()} slower"


def _threads_text(threads: pd.Series | None) -> str:
    values = sorted({int(t) for t in threads.dropna()}) if threads is not None else []
    if not values:
        return "threads"
    return f"{'/'.join(map(str, values))} thread{'s' * (values != [1])}"


def published_cpu_over_gpu(figures: pd.DataFrame, by: list[str] = ()) -> pd.DataFrame:
    """The write-up's CPU time / GPU time per group of `by` (a figure stated as a ratio is taken as it
    is): the `by` columns, `speedup`, the hardware as stated and the source."""
    groups = figures.groupby(list(by), dropna=False) if by else [((), figures)]
    out = []
    for key, part in groups:
        values = part.set_index("device")["value"]
        ratio = values.iloc[0] if (part["unit"] == "x").all() else values["CPU"] / values["GPU"]
        out.append({**dict(zip(by, key)), "speedup": float(ratio), "hardware": " / ".join(part["hardware"].unique()),
                    "source": part["source"].iloc[0]})
    return pd.DataFrame(out, columns=[*by, "speedup", "hardware", "source"])


def within_factor(measured: float, published: float, factor: float = 2.0) -> bool:
    return published / factor <= measured <= published * factor


def _value(row: pd.Series) -> str:
    return f"{row['value']:g}x" if row["unit"] == "x" else f"{row['value']:g} {row['unit']}"


QUALIFIERS = ("batch_size", "epochs", "log_every", "val", "size", "samples", "model", "variant")  # published params


def _qualifier(row: pd.Series) -> str:
    params = {k: row[k] for k in QUALIFIERS if k in row and pd.notna(row[k])}
    return f" ({', '.join(f'{k} {v:g}' if isinstance(v, float) else f'{k} {v}' for k, v in params.items())})" if params else ""


def _join(*parts: str) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())
