"""The TabNet experiment's tables and claims, over the rows frame."""
import numpy as np
import pandas as pd

from core.present import analysis, stats
from core.present.analysis import Claim, Finding
from core.experiments.tabnet.experiment import AS_WRITTEN, PARTS
from core.present.tables import Table

GAIN_RANGE = (1.3, 2.0)  # "30% to 100%" faster on the GPU
FIGURES = ("tabnet-10-epochs",)
RATIO_COLUMNS = ["run_id", "machine", "device", "device_name", "variant", "batch_size", "cpu_s", "gpu_s", "speedup",
                 "speedup_ci", "best_cpu_threads", "best_speedup"]


def cpu_over_gpu(rows: pd.DataFrame) -> pd.DataFrame:
    """CPU time per epoch / GPU time per epoch (`speedup`), per machine, GPU, variant and batch size,
    each GPU point beside the same point on its machine's CPU (core.present.analysis's pairing rule)."""
    paired = analysis.speedups(analysis.latest(rows, every_threads=True))
    if paired.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    paired = analysis.with_interval(paired)
    return paired.rename(columns={"cpu_median_s": "cpu_s", "median_s": "gpu_s",
                                  "cpu_best_torch_threads": "best_cpu_threads"}).reindex(columns=RATIO_COLUMNS)


def published_cpu_over_gpu(published: pd.DataFrame) -> pd.DataFrame:
    """The write-up's CPU seconds / GPU seconds per batch size."""
    return analysis.published_cpu_over_gpu(published, ["batch_size"])[["batch_size", "speedup"]]


def time_split(rows: pd.DataFrame) -> pd.DataFrame:
    """Seconds of each part of one fit (setup, loader wait, steps, evaluation, importance), long form."""
    ok = analysis.ok(rows)
    keep = ["run_id", "machine_id", "machine", "device", "variant", "batch_size", "rows", "epochs_run"]
    if ok.empty:
        return pd.DataFrame(columns=keep + ["part", "seconds"])
    long = ok.melt(id_vars=keep, value_vars=[f"{p}_s" for p in PARTS], var_name="part", value_name="seconds")
    return long.assign(part=long["part"].str.removesuffix("_s"))


def final_losses(rows: pd.DataFrame) -> pd.DataFrame:
    """Training loss after the last epoch per batch size, one column per variant and device: a CPU and
    a GPU fit of one configuration should land close together."""
    ok = analysis.ok(rows)
    if ok.empty or "final_train_loss" not in ok:
        return pd.DataFrame()
    table = ok.assign(fit=ok["variant"] + " · " + ok["device"]).pivot_table(
        index=["run_id", "batch_size"], columns="fit", values="final_train_loss")
    return table.reset_index().rename_axis(columns=None)


def _as_written_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    found = analysis.speedups(analysis.latest(rows, every_threads=True))
    return analysis.require(found[found["variant"] == AS_WRITTEN], rows)


def _by_size(pairs: pd.DataFrame) -> pd.Series:
    """The CPU/GPU ratio per batch size, the median over the pairs."""
    return pairs.groupby("batch_size")["speedup"].median().sort_index()


def _ratios_text(by_size: pd.Series) -> str:
    return ", ".join(f"{size}: {ratio:.2f}x" for size, ratio in by_size.items())


def _theirs(published: pd.DataFrame) -> str:
    return _ratios_text(published_cpu_over_gpu(published).set_index("batch_size")["speedup"])


def _per_size(pairs: pd.DataFrame, reduce) -> stats.Interval:
    """The interval of `reduce` over the per-batch-size median CPU/GPU ratios (sorted by batch size)."""
    sizes = np.sort(pairs["batch_size"].unique())
    member = pairs["batch_size"].to_numpy()[:, None] == sizes[None, :]   # rows x sizes

    def statistic(c):
        ratio = c["cpu_median_s"] / c["median_s"]                       # rows x resamples
        medians = np.stack([np.median(ratio[member[:, i]], axis=0) for i in range(len(sizes))])
        return reduce(medians)
    return stats.interval(pairs, statistic, {"samples_s": ("median_s",), "cpu_samples_s": ("cpu_median_s",)})


def _gain_grows(rows: pd.DataFrame, published: pd.DataFrame) -> Finding:
    pairs = _as_written_pairs(rows)
    by_size, gpus = _by_size(pairs), len(pairs[["machine_id", "device"]].drop_duplicates())
    if len(by_size) < 2:
        return Finding(False, f"Only batch size {by_size.index[0]} was measured on both: no growth to tell "
                              f"({_ratios_text(by_size)}).", exact="one batch size: no growth to take an interval of")
    growth = _per_size(pairs, lambda medians: medians[-1] / medians[0])
    return Finding(growth.value > 1, f"CPU/GPU time per epoch, as written (median over {gpus} GPU(s)): "
                                     f"{_ratios_text(by_size)}; largest batch over smallest {growth.text()}. "
                                     f"{analysis.cpu_baselines(pairs)} The write-up's ratios: {_theirs(published)}.",
                   interval=growth, thresholds=(1.0,))


def _gain_modest(rows: pd.DataFrame, published: pd.DataFrame) -> Finding:
    pairs = _as_written_pairs(rows)
    by_size = _by_size(pairs)
    low, high = GAIN_RANGE
    best = _per_size(pairs, lambda medians: medians.max(axis=0))
    return Finding(low <= best.value <= high, f"The best gain, as written, is {best.text()} (at batch size "
                                              f"{by_size.idxmax()}). {analysis.cpu_baselines(pairs)} The write-up's "
                                              f"ratios: {_theirs(published)}.",
                   interval=best, thresholds=GAIN_RANGE)


CLAIMS = [
    Claim("The GPU's gain grows with the batch size (about 100% at 4096)", _gain_grows,
          "Reproduced means larger at the largest batch size than at the smallest.", FIGURES),
    Claim("The GPU's gain stays modest: 30% to 100% faster than the CPU", _gain_modest,
          f"Reproduced means it lies between {GAIN_RANGE[0]}x and {GAIN_RANGE[1]}x.", FIGURES),
]
TABLES = {
    "GPU speedup per batch size (CPU seconds / GPU seconds per epoch, the same machine and configuration)":
        Table(cpu_over_gpu, {"cpu_s": "CPU (s per epoch)", "gpu_s": "GPU (s per epoch)", "speedup_ci": "Speedup, 95% CI",
                             "best_cpu_threads": "Fastest CPU threads", "best_speedup": "Speedup over the fastest CPU"},
              needs_gpu=True),
    "Training loss after the last epoch, per variant and device": Table(final_losses),
}
