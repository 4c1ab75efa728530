"""The MLP regression-surface experiment's tables and claims, over the rows frame: CPU and GPU time per
epoch paired by the shared rule, the sample-size crossover, and the surfaces each device learned."""
import numpy as np
import pandas as pd

from core import published
from core.present import analysis, stats
from core.present.analysis import Claim, Finding, NoFinding
from core.experiments.mlp_surface.model import AS_WRITTEN, SURFACE_GRID, TUNED, WITH_LOADER, target_surface
from core.published import figure_text
from core.present.tables import Table

PAPER_SPEEDUP = "surface-speedup.gpu.samples40000"
PAPER_SAMPLES = published.entry(PAPER_SPEEDUP)["params"]["samples"]
IDENTICAL_FRACTION = 0.05  # surfaces closer than this share of the target's range look identical
SAME_SPEED_FACTOR = 2.0  # "no difference": CPU and GPU within this factor of each other
# what an interval of a pair's speedup reads (core.present.stats: each side's time moves with its samples)
INTERVAL_COLUMNS = ["samples_s", "cpu_samples_s", "cpu_best_seconds_per_epoch", "cpu_best_samples_s",
                    "cpu_torch_threads", "cpu_best_torch_threads", "cpu_thread_settings", "tf32_cudnn", "best_speedup"]
SPEEDUP_COLUMNS = ["run_id", "machine", "device", "device_name", "variant", "role", "samples", "epochs",
                   "cpu_seconds_per_epoch", "seconds_per_epoch", "speedup", "cuda_graph", "cuda_graph_error"]


def has_surface(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray)) and len(value) == SURFACE_GRID**2


def epoch_speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """CPU seconds per epoch / accelerator seconds per epoch for every point measured on both (the
    shared pairing), without the curves and surfaces."""
    return analysis.speedups(analysis.latest(rows, every_threads=True), "seconds_per_epoch").reindex(
        columns=[*SPEEDUP_COLUMNS, *INTERVAL_COLUMNS])


def crossover_sizes(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, accelerator and variant: the smallest swept sample count from which it beats the CPU
    at every larger swept size (None when it never does)."""
    sweep = epoch_speedups(rows)
    found = analysis.crossovers(sweep[sweep["role"] == "sweep"], "samples",
                                ["machine", "device", "variant"])
    return found.rename(columns={"crossover": "gpu_faster_from_samples", "compared": "sizes_compared"})


def surface_differences(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, accelerator and variant, the largest |accelerator surface - CPU surface| on the 40 x 40
    grid of the same surface point, with both final MSEs."""
    cols = ["machine", "variant", "device", "samples", "epochs", "cpu_final_mse", "gpu_final_mse",
            "max_abs_surface_diff", "diff_share_of_target_range"]
    found = analysis.ok(rows)
    if found.empty or "surface" not in found:
        return pd.DataFrame(columns=cols)
    paired = analysis.pair(found[found["role"] == "surface"], ("surface", "final_mse"))
    paired = paired[paired["surface"].map(has_surface) & paired["cpu_surface"].map(has_surface)]
    diffs = [float(np.max(np.abs(np.subtract(gpu, cpu)))) for gpu, cpu in zip(paired["surface"], paired["cpu_surface"])]
    return paired.assign(gpu_final_mse=paired["final_mse"], max_abs_surface_diff=diffs,
                         diff_share_of_target_range=np.divide(diffs, float(np.ptp(target_surface()))))[cols]


def final_losses(rows: pd.DataFrame) -> pd.DataFrame:
    """The surface runs' outcome per device and variant: final MSE, whether it diverged, time."""
    cols = ["run_id", "machine", "device", "variant", "samples", "epochs", "final_mse", "diverged",
            "median_s", "seconds_per_epoch"]
    found = analysis.ok(rows)
    if found.empty or "final_mse" not in found:
        return pd.DataFrame(columns=cols)
    return found[found["role"] == "surface"][cols].reset_index(drop=True)


def at_paper_size(frame: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Points at 40,000 samples; the surface run's (the longest training) when there is one."""
    if frame.empty:
        return frame
    part = frame[(frame["variant"] == variant) & (frame["samples"] == PAPER_SAMPLES)]
    return part[part["role"] == "surface"] if (part["role"] == "surface").any() else part


def _cpu_epoch_note(rows: pd.DataFrame, stated: float) -> str:
    found = analysis.ok(rows)
    cpu = at_paper_size(found[found["device"] == "cpu"], AS_WRITTEN) if len(found) else found
    if cpu.empty:
        return ""
    per_epoch = cpu["seconds_per_epoch"].median()
    return (f"On the CPU measured, 40,000 samples train in {per_epoch * 1e3:.1f} ms per epoch as written "
            f"({per_epoch * 2000:.1f} s for 2,000 epochs), so a {stated:g}x faster GPU would have to do a whole "
            f"training step in {per_epoch / stated * 1e6:.0f} µs.")


def _tuned_note(sp: pd.DataFrame) -> str:
    tuned = at_paper_size(sp, TUNED)
    if tuned.empty:
        return ""
    failed = tuned["cuda_graph_error"].notna().any()
    graphed = tuned["cuda_graph"].astype(object).fillna(False).astype(bool).all()
    how = ("one read; the CUDA graph capture failed, eager steps" if failed
           else "CUDA graph, one read" if graphed else "one read, eager steps (no CUDA graph on this device)")
    return f"; tuned ({how}): {_speedup(tuned).text('{:.1f}x')}"


def _check_paper_speedup(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    stated = float(figures["value"].iloc[0])
    sp = epoch_speedups(rows)
    mine = analysis.require(at_paper_size(sp, AS_WRITTEN), rows, _cpu_epoch_note(rows, stated))
    measured = _speedup(mine)
    return Finding(analysis.within_factor(measured.value, stated),
                   f"Measured {measured.text('{:.1f}x')} as written (CPU time per epoch / GPU time per epoch, median "
                   f"over {len(mine)} pair(s)){_tuned_note(sp)}. The ratio is only as large as the CPU baseline is "
                   f"slow. {analysis.cpu_baselines(mine, EPOCH)} " + _cpu_epoch_note(rows, stated),
                   interval=measured, thresholds=(stated / 2, stated * 2), form="{:.1f}x")


EPOCH = "seconds_per_epoch"


def _speedup(pairs: pd.DataFrame, reduce=np.median) -> stats.Interval:
    return stats.ratio(pairs, f"cpu_{EPOCH}", EPOCH, reduce)


def _swept(rows: pd.DataFrame, low: int, high: int) -> pd.DataFrame:
    """The as-written sweep's speed-ups from `low` to `high` samples."""
    sp = analysis.require(epoch_speedups(rows), rows)
    sweep = sp[(sp["variant"] == AS_WRITTEN) & (sp["role"] == "sweep")]
    part = sweep[sweep["samples"].between(low, high)]
    if part.empty:
        raise NoFinding(analysis.NO_DATA, f"No swept size from {low:,} to {high:,} samples.")
    return part


def _sizes(part: pd.DataFrame) -> str:
    medians = part.groupby("samples")["speedup"].median()
    return ", ".join(f"{size:,}: {x:.2f}x" for size, x in medians.items())


def _check_small_cpu_faster(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    part = _swept(rows, 100, 200)
    fastest = _speedup(part, np.max)  # the CPU is faster at every size: the GPU's best speed-up is below 1
    return Finding(fastest.value < 1, f"GPU speed-up over the CPU as written (below 1: the CPU is faster) at "
                                      f"{_sizes(part)}; the largest {fastest.text()}. "
                                      f"{analysis.cpu_baselines(part, EPOCH)}",
                   interval=fastest, thresholds=(1.0,))


def _check_no_difference(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    part = _swept(rows, 100, 1000)
    apart = stats.interval(part, lambda c: np.max(np.abs(np.log(c[f"cpu_{EPOCH}"] / c[EPOCH])), axis=0),
                           {"samples_s": (EPOCH,), "cpu_samples_s": (f"cpu_{EPOCH}",)})
    widest = stats.Interval(*np.exp([apart.value, apart.low, apart.high]), apart.points, apart.unresampled)
    return Finding(widest.value <= SAME_SPEED_FACTOR, f"GPU speed-up over the CPU as written at {_sizes(part)}; the "
                                                      f"widest gap either way {widest.text()}. "
                                                      f"{analysis.cpu_baselines(part, EPOCH)}",
                   interval=widest, thresholds=(SAME_SPEED_FACTOR,))


def _check_gpu_ahead(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    mine = analysis.require(at_paper_size(epoch_speedups(rows), AS_WRITTEN), rows)
    measured = _speedup(mine)
    return Finding(measured.value > 1, f"The GPU trains {measured.text()} as fast as the CPU at 40,000 samples (as "
                                       f"written). {analysis.cpu_baselines(mine, EPOCH)}",
                   interval=measured, thresholds=(1.0,))


def _check_loader(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    compared = analysis.relative_to(rows, AS_WRITTEN, "seconds_per_epoch")
    loader = compared[(compared["variant"] == WITH_LOADER) & (compared["samples"] == PAPER_SAMPLES)
                      & analysis.on_accelerator(compared)] if len(compared) else compared
    if loader.empty and analysis.on_accelerator(analysis.ok(rows)).any():
        raise NoFinding(analysis.NO_DATA, "No GPU point of both variants at 40,000 samples (a skipped point has "
                                          "no time).")
    analysis.require(loader, rows)
    ratio = stats.ratio(loader, EPOCH, f"baseline_{EPOCH}")
    return Finding(ratio.value > 1, f"On the GPU at 40,000 samples an epoch with the DataLoader takes "
                                    f"{ratio.text('{:.1f}x')} as long as the full-batch epoch.",
                   interval=ratio, thresholds=(1.0,), form="{:.1f}x")


def _check_identical(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    diffs = surface_differences(rows)
    diffs = analysis.require(diffs[diffs["variant"] == AS_WRITTEN], rows)
    worst = diffs.loc[diffs["max_abs_surface_diff"].idxmax()]
    return Finding(worst["diff_share_of_target_range"] <= IDENTICAL_FRACTION,
                   f"Largest |GPU - CPU| on the 40 x 40 grid: {worst['max_abs_surface_diff']:.4f} "
                   f"({worst['diff_share_of_target_range']:.1%} of the target's range). Final MSE: CPU "
                   f"{worst['cpu_final_mse']:.4f}, GPU {worst['gpu_final_mse']:.4f}.",
                   exact="a difference between two surfaces, not a timing: no interval")


CLAIMS = [
    Claim(f"Over 2,000 epochs at 40,000 samples the GPU trains about {figure_text(PAPER_SPEEDUP)} faster than "
          "the CPU", _check_paper_speedup, f"Reproduced means within a factor of 2 of {figure_text(PAPER_SPEEDUP)}.",
          (PAPER_SPEEDUP,)),
    Claim("With 100-200 samples the CPU trains faster than the GPU", _check_small_cpu_faster,
          "Reproduced means the CPU is faster at every swept size in that range."),
    Claim("With 100-1,000 samples there is no difference between the CPU and the GPU", _check_no_difference,
          f"No difference means within a factor of {SAME_SPEED_FACTOR:g} either way at every size."),
    Claim("With 40,000 samples the advantage is on the GPU side", _check_gpu_ahead),
    Claim("Feeding the GPU from a DataLoader slows training down", _check_loader),
    Claim("The same seed gives visually identical surfaces on the CPU and the GPU", _check_identical,
          f"Identical means the largest difference is at most {IDENTICAL_FRACTION:.0%} of the target's range.",
          predictable=False),
]
TABLES = {
    "Final MSE of the surface runs per device and variant":
        Table(final_losses, {"median_s": "Training time (s)"}),
    "Largest difference between the surfaces learned on the CPU and on each GPU (same machine and configuration)":
        Table(surface_differences, {"max_abs_surface_diff": "Largest |GPU - CPU|",
                                    "diff_share_of_target_range": "Share of the target's range"},
              percent=("diff_share_of_target_range",), needs_gpu=True),
    "Crossover: the smallest swept sample count from which the GPU beats the CPU at every larger size":
        Table(crossover_sizes, {"gpu_faster_from_samples": "GPU faster from (samples)"},
              missing={"gpu_faster_from_samples": "never"}, needs_gpu=True),
}
