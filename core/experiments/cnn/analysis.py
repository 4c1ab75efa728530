"""The CNN experiment's tables and claims, over the rows frame: GPU/CPU speedups and the data-size
crossover (paired by core.present.analysis), the tuned variant's gain, and the write-up's 10-epoch times."""
import numpy as np
import pandas as pd

from core.present import analysis, stats
from core.present.analysis import NO_DATA, Claim, Finding, NoFinding
from core.experiments.cnn.experiment import AS_WRITTEN
from core.experiments.cnn.model import MODELS
from core.published import figure_text
from core.present.tables import Table

SMALL_DATA_ROWS = 100_000      # the write-up: the CPU is faster with 1e3 to 1e5 rows
MODEST_GAIN = (1.0, 2.0)       # "only about 30%": faster on the GPU, but by less than 2x
GRU_GAIN_FACTOR = 3.0          # "about 100x" reproduced within a factor of 3
FAR_MORE = 2.0                 # "far more": at least twice the 1-D model's speedup
GRU_GAIN = "gru-gain.gpu.gru"
POINT_COLUMNS = ["model", "batch_size", "rows", "steps_per_epoch", "step_s", "seconds_10_epochs"]
PER_BATCH = ["machine_id", "device", "variant", "model", "batch_size"]


def measured(rows: pd.DataFrame, every_threads: bool = False) -> pd.DataFrame:
    """The points to compare (core.present.analysis.latest: the CPU's at its default threads unless
    `every_threads`), with this experiment's columns even when empty."""
    data = analysis.latest(rows, every_threads=every_threads)
    return data.reindex(columns=[*data.columns, *(c for c in POINT_COLUMNS if c not in data)])


def largest_rows(table: pd.DataFrame) -> pd.DataFrame:
    """For each machine, device, variant, model and batch, the entry with the most rows (the latest
    run's when several have as many)."""
    return table.sort_values(["rows", "started"], kind="stable").drop_duplicates(PER_BATCH, keep="last")


def per_batch(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, device, variant, model and batch: the point with the most rows, plus its time per
    step scaled to the write-up's training-set size and 10 epochs (`projected_s_10_epochs`)."""
    data = largest_rows(measured(rows))
    published_rows = data["model"].map(lambda m: MODELS[m].published_rows).astype(float)
    steps = np.ceil(published_rows / data["batch_size"])  # the author's DataLoader ran a short last batch
    return data.assign(published_rows=published_rows, projected_s_10_epochs=10 * steps * data["step_s"])


def gpu_speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """CPU time / accelerator time per epoch for every point measured on both (core.present.analysis pairing), the
    fastest CPU thread setting beside the default."""
    return analysis.speedups(measured(rows, every_threads=True))


def speedup_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Each pair's speedup with its 95% interval, against the CPU at its default threads and at its fastest."""
    sp = analysis.with_interval(gpu_speedups(rows)).rename(
        columns={"cpu_median_s": "cpu_s_per_epoch", "median_s": "gpu_s_per_epoch", "cpu_torch_threads": "cpu_threads",
                 "cpu_best_torch_threads": "best_cpu_threads"})
    return sp.reindex(columns=["machine", "device", "device_name", "model", "variant", "batch_size", "rows", "cpu_threads",
                               "cpu_s_per_epoch", "gpu_s_per_epoch", "speedup", "speedup_ci", "best_cpu_threads",
                               "best_speedup"])


def data_size_crossovers(rows: pd.DataFrame) -> pd.DataFrame:
    """The 1-D data-size sweep: per machine, accelerator, variant and batch, the smallest row count
    from which the accelerator beats the CPU at every larger measured count (None: it never does)."""
    sp = gpu_speedups(rows)
    found = analysis.crossovers(sp[sp["model"] == "cnn1d"], "rows", ["machine", "device", "variant", "batch_size"])
    found = found[found["compared"] > 1]
    compared = [f"{low:,} to {high:,} ({n} sizes)" for low, high, n in
                zip(found["smallest"], found["largest"], found["compared"])]
    return found.assign(rows_compared=compared).rename(columns={"crossover": "crossover_rows"})[
        ["machine", "device", "variant", "batch_size", "crossover_rows", "rows_compared"]]


def variant_gains(rows: pd.DataFrame) -> pd.DataFrame:
    """Time per step of both variants and `as written / tuned` for every point measured with both."""
    out = analysis.relative_to(measured(rows), AS_WRITTEN, "step_s")
    out = out.assign(step_ms_as_written=out["baseline_step_s"] * 1e3, step_ms_tuned=out["step_s"] * 1e3,
                     tuned_speedup=out["gain"])
    return out[["machine", "device", "model", "batch_size", "rows", "step_ms_as_written", "step_ms_tuned",
                "tuned_speedup"]]


def published_speedups(published: pd.DataFrame) -> pd.DataFrame:
    """The write-up's GPU gains: CPU time / GPU time per figure and batch, or the stated factor; the 1-D
    figures name no model."""
    gains = analysis.published_cpu_over_gpu(published, ["figure", "model", "batch_size"])
    return gains.assign(model=gains["model"].astype(object).fillna("cnn1d"))[["model", "batch_size", "speedup", "hardware", "source"]]


# -- claims ----------------------------------------------------------------------------------------
def _written_pairs(rows: pd.DataFrame, chosen, *models: str, context: str = "") -> pd.DataFrame:
    """The as-written GPU/CPU pairs a claim on `models` needs (`chosen` picks them from every pair),
    or NoFinding: no results for a model yet, no GPU results, or no pair that fits the claim."""
    if not set(models) <= set(measured(rows)["model"]):
        raise NoFinding(NO_DATA, f"No results for {' and '.join(models)} yet: run this experiment with "
                                 f"models={','.join(models)}.")
    sp = gpu_speedups(rows)
    found = chosen(sp[(sp["variant"] == AS_WRITTEN) & sp["model"].isin(models)])
    return analysis.require(found if set(models) <= set(found["model"]) else found.iloc[0:0], rows, context)


def _small_data(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    small = _written_pairs(rows, lambda sp: sp[sp["rows"] <= SMALL_DATA_ROWS], "cnn1d",
                           context=f"This claim needs 1-D points with at most {SMALL_DATA_ROWS:,} rows.")
    cpu_wins = int((small["speedup"] < 1).sum())
    median = stats.ratio(small, "cpu_median_s", "median_s")
    return Finding(median.value < 1, f"As written, at {len(small)} point(s) with at most {SMALL_DATA_ROWS:,} rows the "
                                     f"CPU was faster at {cpu_wins}; median GPU/CPU speedup {median.text()}. "
                                     f"{analysis.cpu_baselines(small)} Epoch times exclude the warm-up epoch, which "
                                     f"carries the start-up costs (first_epoch_s in the table).",
                   interval=median, thresholds=(1.0,))


def _modest_gain(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    best = _written_pairs(rows, largest_rows, "cnn1d")
    median = stats.ratio(best, "cpu_median_s", "median_s")
    low, high = MODEST_GAIN
    each = ", ".join(f"{r.speedup:.2f}x at batch {r.batch_size}" for r in best.sort_values("batch_size").itertuples())
    stated = published_speedups(figures)["speedup"]
    return Finding(low < median.value < high, f"As written: {each} (median {median.text()}; largest data size per "
                                              f"batch). {analysis.cpu_baselines(best)} Published speedups (CPU time / "
                                              f"GPU time): {stated.min():.2f}x to {stated.max():.2f}x.",
                   interval=median, thresholds=MODEST_GAIN)


def _gru_gain(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    gru = _written_pairs(rows, largest_rows, "gru")
    stated = float(published_speedups(figures)["speedup"].iloc[0])
    best = stats.ratio(gru, "cpu_median_s", "median_s", reduce=np.max)
    return Finding(analysis.within_factor(best.value, stated, GRU_GAIN_FACTOR),
                   f"Best GRU speedup (as written, over batch sizes): {best.text('{:.1f}x')}; published about "
                   f"{stated:g}x. {analysis.cpu_baselines(gru)} Our GRU's shape is our choice; the author's is unknown.",
                   interval=best, thresholds=(stated / GRU_GAIN_FACTOR, stated * GRU_GAIN_FACTOR), form="{:.1f}x")


def _two_d_gain(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    both = _written_pairs(rows, largest_rows, "cnn1d", "mnist")
    by_model = both.groupby("model")["speedup"].median()
    mnist = (both["model"] == "mnist").to_numpy()[:, None]

    def ratio(c):  # MNIST's median speedup over the 1-D model's
        gain = c["cpu_median_s"] / c["median_s"]
        return np.nanmedian(np.where(mnist, gain, np.nan), axis=0) / np.nanmedian(np.where(mnist, np.nan, gain), axis=0)
    found = stats.interval(both, ratio, {"samples_s": ("median_s",), "cpu_samples_s": ("cpu_median_s",)})
    return Finding(found.value >= FAR_MORE, f"Median GPU/CPU speedup as written: MNIST network {by_model['mnist']:.2f}x, "
                                            f"1-D CNN {by_model['cnn1d']:.2f}x (MNIST's {found.text('{:.1f}x')} the 1-D CNN's). "
                                            f"{analysis.cpu_baselines(both)}",
                   interval=found, thresholds=(FAR_MORE,), form="{:.1f}x")


CLAIMS = [
    Claim("With small data sets (1e3 to 1e5 rows) the CPU trains the 1-D model faster than the GPU", _small_data,
          "Reproduced means the median speedup there is below 1."),
    Claim("On the 1-D model the GPU is only about 30% faster than the CPU (10 epochs, 1,000,000 rows)", _modest_gain,
          f"Reproduced means the GPU is faster but by less than {MODEST_GAIN[1]:g}x.", ("cnn-10-epochs",)),
    Claim(f"A multi-feature GRU model trains about {figure_text(GRU_GAIN)} faster on the GPU", _gru_gain,
          f"Reproduced means within a factor of {GRU_GAIN_FACTOR:g} of it.", (GRU_GAIN,)),
    Claim("2-D models gain far more from a GPU than the 1-D model", _two_d_gain,
          f"Reproduced means at least {FAR_MORE:g} times the 1-D model's speedup."),
]
TABLES = {
    "Data-size crossover: the smallest training set from which the GPU beats the CPU at every larger size":
        Table(data_size_crossovers, {"crossover_rows": "GPU faster from (rows)", "rows_compared": "Rows compared"},
              missing={"crossover_rows": "never"}, needs_gpu=True),
    "GPU speedup over the CPU for every point measured on both":
        Table(speedup_table, {"cpu_s_per_epoch": "CPU (s per epoch)", "gpu_s_per_epoch": "GPU (s per epoch)",
                              "cpu_threads": "CPU threads (torch's default)", "speedup_ci": "Speedup, 95% CI",
                              "best_cpu_threads": "Fastest CPU threads", "best_speedup": "Speedup over the fastest CPU"},
              needs_gpu=True),
    "Tuned vs as written: milliseconds per training step":
        Table(variant_gains, {"step_ms_as_written": "As written (ms per step)", "step_ms_tuned": "Tuned (ms per step)",
                              "tuned_speedup": "Tuned speedup (as written / tuned)"}),
}
