"""The Jacobian experiment's tables and claims, over the rows frame. The written call's time at a val
where it was not measured is extrapolated from its time model; a verdict resting on such a figure is
marked estimated."""
import numpy as np
import pandas as pd

from core import published
from core.present import analysis, stats
from core.present.analysis import NO_DATA, Claim, Finding, NoFinding
from core.experiments.jacobian.experiment import (AS_WRITTEN, COMPLEXITY, METHODS, MOVE, PER_SAMPLE, duration,
                                                  extrapolation_fit)
from core.present.tables import Table

SERIES = ["machine_id", "machine", "config_id", "device"]  # one configuration's points on one device
PAIRED_BY = ["machine_id", "config_id"]                     # a GPU's and its machine's CPU's (the shared rule)
SLOWER_AT = ("jacobian-wall.gpu.val100", "jacobian-wall.cpu.val100")    # the GPU's figure first
FASTER_AT = ("jacobian-wall.gpu.val1000", "jacobian-wall.cpu.val1000")
MOVE_FIGURE = "jacobian-move.gpu"
# gains over the written call are reported up to the write-up's largest val
WRITE_UP_MAX_VAL = int(published.load("jacobian")["val"].max())
# A verdict rests on the written call's time model at most this far past the larger val it was fitted to: the quick
# preset's reach (100 -> 1,000). From the smoke preset's val 2 and 6, the lent H200's GPU read 115 min at val=1000,
# where the write-up measured 3.2 (a quadratic term two small, noisy points decide).
MAX_REACH = 10


def _latest(rows: pd.DataFrame, variants, every_threads: bool = False) -> pd.DataFrame:
    """The latest complete run's measured points of these variants (core.present.analysis.latest: the CPU's at its
    default threads unless `every_threads`)."""
    if rows.empty or "val" not in rows.columns:
        return pd.DataFrame(columns=[*SERIES, "variant", "val", "median_s"])
    data = analysis.latest(rows, every_threads=every_threads)
    return data[data["variant"].isin(variants)]


def naive_times(rows: pd.DataFrame, val: int, every_threads: bool = False, reach: float | None = None) -> pd.DataFrame:
    """Per machine, configuration and device (and CPU thread setting, with `every_threads`): the written call's time
    at `val`, measured (with its samples) or, when not measured there, extrapolated from its time model fitted to the
    two largest vals measured there (with `reach`, only where `val` is at most that many times the larger)."""
    out = []
    written = _latest(rows, [AS_WRITTEN], every_threads)
    threads = [c for c in ("threads_setting", "torch_threads") if c in written]
    for keys, part in written.groupby([*SERIES, *threads], dropna=False):
        per_val = part.groupby("val")["median_s"].median()
        samples = part[part["val"] == val]["samples_s"].iloc[0] if "samples_s" in part and val in per_val.index else None
        if val in per_val.index:
            seconds, basis = float(per_val[val]), "measured"
        elif len(per_val) >= 2:
            coefficients, fitted_on = extrapolation_fit(AS_WRITTEN, per_val)
            if reach is not None and val > reach * max(fitted_on):
                continue
            seconds = float(np.dot(coefficients, COMPLEXITY[AS_WRITTEN].terms(val)))
            basis = f"extrapolated ({COMPLEXITY[AS_WRITTEN].formula} fitted to val {' and '.join(map(str, fitted_on))})"
        else:
            continue
        out.append({**dict(zip([*SERIES, *threads], keys)), "val": val, "naive_s": seconds, "naive_basis": basis,
                    "samples_s": samples})
    return pd.DataFrame(out, columns=[*SERIES, *threads, "val", "naive_s", "naive_basis", "samples_s"])


def written_call_pairs(rows: pd.DataFrame, val: int, reach: float | None = MAX_REACH) -> pd.DataFrame:
    """Every GPU's written-call time at `val` beside its machine's CPU's with the same configuration
    (`cpu_naive_s`, `cpu_naive_basis`), each measured or extrapolated (at most `reach` past the vals timed)."""
    return analysis.beside_cpu(naive_times(rows, val, every_threads=True, reach=reach), ("naive_s", "naive_basis"),
                               PAIRED_BY)


def gains_over_written(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, configuration, device and val up to the write-up's largest: the written call's time
    (measured or extrapolated) over the fastest per-sample method's (`gain`)."""
    per_sample = _latest(rows, PER_SAMPLE)
    per_sample = per_sample[per_sample["val"] <= WRITE_UP_MAX_VAL]
    best = (per_sample.sort_values("median_s").groupby([*SERIES, "val"]).head(1)[[*SERIES, "val", "variant", "median_s"]]
            .rename(columns={"variant": "best_method", "median_s": "best_s"}))
    columns = [*SERIES, "val", "naive_s", "naive_basis", "best_method", "best_s", "gain"]
    if best.empty:
        return pd.DataFrame(columns=columns)
    naive = pd.concat([naive_times(rows, int(v)) for v in sorted(best["val"].unique())], ignore_index=True)
    out = naive.merge(best, on=[*SERIES, "val"])
    out["gain"] = out["naive_s"] / out["best_s"]
    return out.sort_values([*SERIES, "val"])[columns]


def correctness(rows: pd.DataFrame) -> pd.DataFrame:
    """Every measured point's largest difference from the written call's per-sample Jacobian."""
    measured = analysis.ok(rows)
    if "max_abs_diff_vs_naive" not in measured.columns:
        return pd.DataFrame(columns=["machine", "device", "variant", "val", "max_abs_diff_vs_naive"])
    checked = measured[measured["variant"].isin(METHODS) & measured["max_abs_diff_vs_naive"].notna()]
    extra = [c for c in ("nonzero_fraction", "off_block_nonzeros") if c in checked.columns]
    return checked[["machine", "device", "variant", "val", "max_abs_diff_vs_naive", *extra]].sort_values(
        ["machine", "device", "val", "variant"])


def skipped(rows: pd.DataFrame) -> pd.DataFrame:
    """The points not attempted, with why and the estimates that decided it."""
    columns = ["machine", "device", "variant", "val", "estimated_seconds", "estimated_gb", "free_gb", "reason"]
    if rows.empty or "estimated_bytes" not in rows.columns:
        return pd.DataFrame(columns=columns)
    part = rows[rows["point_status"] == "skipped"]
    return part.assign(estimated_gb=part["estimated_bytes"] / 1e9, free_gb=part["free_bytes"] / 1e9,
                       reason=part["error"])[columns].sort_values(["machine", "device", "variant", "val"])


# -- claims -----------------------------------------------------------------------------------------------
def _stated(figures: pd.DataFrame, device: str) -> float:
    return float(figures.loc[figures["device"] == device, "value"].iloc[0])


def _times_text(pairs: pd.DataFrame) -> str:
    """Each time the verdict rests on, and whether it was measured or extrapolated (from which vals)."""
    several = pairs["machine_id"].nunique() > 1
    each = []
    for _, r in pairs.iterrows():
        where = f" on {r['machine_id']}" if several else ""
        each += [f"cpu{where}: {duration(r['cpu_naive_s'])}, {r['cpu_naive_basis']}",
                 f"{r['device']}{where}: {duration(r['naive_s'])}, {r['naive_basis']}"]
    return "; ".join(dict.fromkeys(each))


def _written_call_on_gpu(ids: tuple[str, str], gpu_slower: bool):
    val = published.entry(ids[0])["params"]["val"]

    def check(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
        if naive_times(rows, val).empty:
            raise NoFinding(NO_DATA, f"The written call has not been timed at val={val}, nor at two vals to "
                                     "extrapolate from, on any machine yet.")
        pairs = written_call_pairs(rows, val)
        if pairs.empty and not written_call_pairs(rows, val, reach=None).empty:
            raise NoFinding(NO_DATA, f"The written call was timed on a CPU and a GPU of one machine only at vals too "
                                     f"small to estimate val={val} from: an estimate reaches at most {MAX_REACH}x past "
                                     f"the larger val timed (val={val / MAX_REACH:g} or more here).")
        pairs = analysis.require(pairs, rows)
        ratio = stats.ratio(pairs, "naive_s", "cpu_naive_s")
        extrapolated = (pairs[["naive_basis", "cpu_naive_basis"]] != "measured").to_numpy().any()
        return Finding(ratio.value > 1 if gpu_slower else ratio.value < 1,
                       f"GPU time / CPU time = {ratio.text('{:.3g}')} (median over {len(pairs)} GPU(s); published "
                       f"{1 / analysis.published_cpu_over_gpu(figures)['speedup'].iloc[0]:.3g}). "
                       f"Times: {_times_text(pairs)}. {analysis.cpu_baselines(pairs, 'naive_s')}",
                       estimated=bool(extrapolated), interval=ratio, thresholds=(1.0,), form="{:.3g}")
    return check


def _claim_text(ids: tuple[str, str], gpu_slower: bool) -> str:
    gpu, cpu = (published.entry(i) for i in ids)
    return (f"At val={gpu['params']['val']} the written call is {'slower' if gpu_slower else 'faster'} on the GPU "
            f"than on the CPU (published: GPU {duration(gpu['value'])}, CPU {duration(cpu['value'])})")


def _move(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    moves = analysis.require(_latest(rows, [MOVE]), rows)
    measured = stats.interval(moves, lambda c: np.median(c["median_s"], axis=0), {"samples_s": ("median_s",)})
    limit = 2 * _stated(figures, "GPU")
    in_ms = stats.Interval(measured.value * 1e3, measured.low * 1e3, measured.high * 1e3, measured.points,
                           measured.unresampled)
    return Finding(measured.value <= limit, f"Measured {in_ms.text('{:.3g} ms')} (median over {len(moves)} point(s), "
                                            f"every val).",
                   interval=in_ms, thresholds=(limit * 1e3,), form="{:.3g} ms")


CLAIMS = [
    Claim(_claim_text(SLOWER_AT, True), _written_call_on_gpu(SLOWER_AT, gpu_slower=True),
          "Reproduced means the written call takes longer on the GPU than on the same machine's CPU.", SLOWER_AT),
    Claim(_claim_text(FASTER_AT, False), _written_call_on_gpu(FASTER_AT, gpu_slower=False),
          "Reproduced means the written call takes less time on the GPU than on the same machine's CPU.", FASTER_AT),
    Claim(f"Moving the model and the input to the GPU takes about {published.entry(MOVE_FIGURE)['value'] * 1e3:g} ms",
          _move, "Reproduced means at most twice the published figure.", (MOVE_FIGURE,)),
]
TABLES = {
    "Correctness: each method's per-sample Jacobian against the written call's diagonal blocks on the same "
    "device (max absolute difference)":
        Table(correctness, {"max_abs_diff_vs_naive": "Largest |difference|", "nonzero_fraction": "Non-zero share",
                            "off_block_nonzeros": "Non-zeros off the diagonal blocks"}),
    "Speedup of the fastest per-sample method over the written call (measured or extrapolated)":
        Table(gains_over_written, {"naive_s": "Written call (s)", "naive_basis": "Written call's time",
                                   "best_method": "Fastest per-sample method", "best_s": "Fastest method (s)",
                                   "gain": "Speedup (written / fastest)"}),
    "Skipped points and the estimates that decided it":
        Table(skipped, {"estimated_seconds": "Estimated time (s)", "estimated_gb": "Estimated memory (GB)",
                        "free_gb": "Free memory (GB)", "reason": "Why skipped"}),
}
