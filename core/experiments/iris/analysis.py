"""The Iris experiment's tables and claims, over the rows frame: what reading the loss costs, whether
tuned learns the same model, and how often a forward hook runs.

The cost of one `loss.item()` is too small to time on its own, so it is timed as a difference: the read-cost
point alternates blocks of epochs reading the loss every epoch with blocks never reading it, in one process,
and `read_cost` turns those paired block times into the cost per read with its 95% interval. Below the noise
floor it says so ('below X µs per read, not resolved'), never a negative cost."""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.present import analysis, stats
from core.store import runs
from core.present.analysis import NEEDS_GPU, NO_DATA, Claim, Finding, NoFinding
from core.present.stats import Interval
from core.experiments.iris.experiment import (AS_WRITTEN, CHECK_CALLS, HOOK_CHECK, NEVER, PAPER_EPOCHS, READ_COST,
                                              TUNED)
from core.present.tables import Table

BARELY = 1.25                   # reading every epoch costs at most 25% more than never reading
DEVICE_KEYS = ["machine_id", "config_id", "device"]   # one device of one machine, one configuration
TOTALS = "iris-total"           # the write-up's CPU and GPU runs, loss read every epoch
GPU_EVERY_EPOCH, GPU_EVERY_2000 = "iris-total.gpu", "iris-log-interval.gpu.log_every2000"


def interval_label(k) -> str:
    return "never" if k == NEVER else str(int(k))


def interval_order(values) -> list[str]:
    """Interval labels from the most frequent reading to never."""
    ks = sorted({int(k) for k in values if pd.notna(k)}, key=lambda k: (k == NEVER, k))
    return [interval_label(k) for k in ks]


def _variant(rows: pd.DataFrame, variant: str) -> pd.DataFrame:
    part = analysis.ok(rows)
    return part[part["variant"] == variant] if len(part) else part


def training_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """as written and tuned points of every run, with their interval label."""
    part = pd.concat([_variant(rows, AS_WRITTEN), _variant(rows, TUNED)])
    if part.empty:
        return part
    return part.assign(interval=part["log_every"].map(interval_label))


def _every_epoch(rows: pd.DataFrame) -> pd.DataFrame:
    """The latest as-written points that read the loss every epoch."""
    written = _variant(analysis.latest(rows), AS_WRITTEN)
    return written[written["log_every"] == 1] if len(written) else written


@dataclass(frozen=True)
class ReadCost:
    """The cost of one loss read from paired blocks: `value`, `low` and `high` in µs per read, never negative (a
    cost is at least 0: the interval is cut at 0); `resolved` when the interval's low end is above 0. Not resolved,
    `high` is the most a read can cost by this measurement (the noise floor). `every_vs_never` is the time of a
    block reading every epoch over one never reading, with its interval (which may fall below 1)."""
    value: float
    low: float
    high: float
    resolved: bool
    pairs: int
    every_vs_never: Interval

    def text(self) -> str:
        """'2.1 µs per read (95% CI 1.2–3.0)', or 'below 1.5 µs per read, not resolved'."""
        if not self.resolved:
            return f"below {_us(self.high)} µs per read, not resolved"
        return f"{_us(self.value)} µs per read (95% CI {_us(self.low)}–{_us(self.high)})"


def read_cost(every_s, never_s, reads_per_block: int) -> ReadCost | None:
    """The cost per read from paired block times (seconds; `every_s[i]` read the loss `reads_per_block` times,
    `never_s[i]` never, pair i run side by side): (mean block time reading - mean never) / reads per block, with a
    95% Student's t interval on the paired differences (mean ± t(0.975, n - 1) · sd / √n, scipy.stats.t). A t
    interval, not a bootstrap: with the few pairs a run takes (4 in smoke) a percentile bootstrap's interval is
    too narrow. At or below 0 at its low end the cost is not resolved, and the interval's high end, at least its
    half-width, bounds it. The every/never ratio's interval is 1 + the difference's interval over the mean block
    time never reading. None with fewer than two pairs or no reads."""
    every, never = np.asarray(every_s, dtype=float), np.asarray(never_s, dtype=float)
    if every.shape != never.shape:
        raise ValueError(f"paired blocks of unequal counts: {every.size} reading and {never.size} never")
    if every.size < 2 or reads_per_block is None or pd.isna(reads_per_block) or reads_per_block <= 0:
        return None
    difference = every - never
    mean = float(difference.mean())
    from scipy import stats as scipy_stats  # imported here: 1.6 s of every start otherwise
    half = float(scipy_stats.t.ppf(0.975, difference.size - 1) * difference.std(ddof=1) / math.sqrt(difference.size))
    per_read = 1e6 / reads_per_block
    low, high = (mean - half) * per_read, (mean + half) * per_read
    base = float(never.mean())
    ratio = Interval(1 + mean / base, 1 + (mean - half) / base, 1 + (mean + half) / base) if base > 0 else \
        Interval(math.nan, math.nan, math.nan)
    return ReadCost(value=max(mean * per_read, 0.0), low=max(low, 0.0), high=max(high, half * per_read, 0.0),
                    resolved=low > 0, pairs=int(difference.size), every_vs_never=ratio)


def _us(value: float) -> str:
    return f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def _blocks_cost(row: pd.Series) -> ReadCost | None:
    """A read-cost row's cost per read; None where it holds no paired blocks (a predicted row)."""
    every, never = row.get("read_block_s"), row.get("never_block_s")
    if not isinstance(every, (list, tuple, np.ndarray)) or not isinstance(never, (list, tuple, np.ndarray)):
        return None
    return read_cost(every, never, row.get("reads_per_block"))


def _device_costs(rows: pd.DataFrame) -> list[dict]:
    """Per machine, configuration and device (latest run): the as-written rows reading every epoch and never, the
    read-cost row's paired blocks as a ReadCost, and the every/never ratio as an Interval: from the paired blocks
    where the run has them, else from the two as-written runs (core.present.stats.ratio over their samples)."""
    latest = analysis.latest(rows)
    written, blocks = _variant(latest, AS_WRITTEN), _variant(latest, READ_COST)
    keyed = pd.concat([written, blocks])
    out = []
    if keyed.empty:
        return out
    for key, part in keyed.groupby(DEVICE_KEYS):
        runs_part = part[part["variant"] == AS_WRITTEN]
        by_k = runs_part.set_index("log_every") if len(runs_part) else runs_part
        every = by_k.loc[[1]] if 1 in by_k.index else None
        never = by_k.loc[[NEVER]] if NEVER in by_k.index else None
        paired = part[part["variant"] == READ_COST]
        cost = _blocks_cost(paired.iloc[-1]) if len(paired) else None
        if cost is not None and math.isfinite(cost.every_vs_never.value):
            ratio = cost.every_vs_never
        elif every is not None and never is not None:
            ratio = _runs_ratio(every.iloc[0], never.iloc[0])
        else:
            ratio = None
        out.append({"key": key, "part": part, "every": None if every is None else every.iloc[0],
                    "never": None if never is None else never.iloc[0], "cost": cost, "ratio": ratio})
    return out


def _runs_ratio(every: pd.Series, never: pd.Series) -> Interval:
    """Time per epoch reading every epoch over never reading, two as-written runs, with the interval from their
    samples (core.present.stats)."""
    frame = pd.DataFrame({"us_per_epoch": [every["us_per_epoch"]], "samples_s": [every.get("samples_s")],
                          "baseline_us_per_epoch": [never["us_per_epoch"]],
                          "baseline_samples_s": [never.get("samples_s")]})
    return stats.ratio(frame, "us_per_epoch", "baseline_us_per_epoch")


def read_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, configuration and device (latest run): the per-epoch cost never reading the loss and reading
    it every epoch (as-written runs), the cost of one read from the alternated blocks (`us_per_read` where
    resolved, else none; `read_cost` in words with its 95% interval, or 'below X µs per read, not resolved'), the
    time reading every epoch over never (from the paired blocks where they exist) and tuned's per-epoch cost."""
    columns = ["run_id", "machine", "device", "device_name", "us_per_epoch_never", "us_per_epoch_every",
               "us_per_read", "read_cost", "every_vs_never", "us_per_epoch_tuned"]
    found = _device_costs(rows)
    if not found:
        return pd.DataFrame(columns=columns)
    tuned = _variant(analysis.latest(rows), TUNED)
    tuned = tuned.set_index(DEVICE_KEYS)["us_per_epoch"] if len(tuned) else pd.Series(dtype=float)
    out = []
    for entry in found:
        part, cost, ratio = entry["part"], entry["cost"], entry["ratio"]
        out.append({"run_id": part["run_id"].iloc[-1], "machine": part["machine"].iloc[0], "device": entry["key"][-1],
                    "device_name": part["device_name"].iloc[0],
                    "us_per_epoch_never": None if entry["never"] is None else entry["never"]["us_per_epoch"],
                    "us_per_epoch_every": None if entry["every"] is None else entry["every"]["us_per_epoch"],
                    "us_per_read": cost.value if cost is not None and cost.resolved else None,
                    "read_cost": read_text(cost), "every_vs_never": None if ratio is None else ratio.value,
                    "us_per_epoch_tuned": tuned.get(entry["key"])})
    return pd.DataFrame(out, columns=columns)


def same_model(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, configuration and device (latest run): final loss reading every epoch (as written)
    against tuned, and the as-written loss against its machine's CPU."""
    columns = ["run_id", "device", "final_loss_as_written", "final_loss_tuned", "tuned_vs_as_written",
               "as_written_vs_cpu", "host_syncs_as_written", "host_syncs_tuned"]
    every = _every_epoch(rows)
    if every.empty:
        return pd.DataFrame(columns=columns)
    on_cpu = analysis.pair(every, ("final_loss",))[[*DEVICE_KEYS, "cpu_final_loss"]]
    tuned = _variant(analysis.latest(rows), TUNED)
    tuned = tuned[[*DEVICE_KEYS, "final_loss", "host_syncs"]].rename(
        columns={"final_loss": "final_loss_tuned", "host_syncs": "host_syncs_tuned"})
    table = every.merge(on_cpu, on=DEVICE_KEYS, how="left").merge(tuned, on=DEVICE_KEYS, how="left")
    cpu_loss = table["cpu_final_loss"].mask(table["device"] == "cpu", table["final_loss"])
    table = table.assign(final_loss_as_written=table["final_loss"], host_syncs_as_written=table["host_syncs"],
                         tuned_vs_as_written=(table["final_loss_tuned"] - table["final_loss"]).abs(),
                         as_written_vs_cpu=(table["final_loss"] - cpu_loss).abs())
    return table[columns].reset_index(drop=True)


def hook_checks(rows: pd.DataFrame) -> pd.DataFrame:
    columns = ["run_id", "machine", "machine_id", "device", "call", "hook", "hook_calls", "check_calls", "us_per_call"]
    part = _variant(analysis.latest(rows), HOOK_CHECK)
    if part.empty:
        return pd.DataFrame(columns=columns)
    return part[columns].astype({"hook": bool, "hook_calls": int, "check_calls": int}).reset_index(drop=True)


# -- claims -------------------------------------------------------------------------------------------
def gpu_over_cpu(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    """The GPU's time per epoch over its machine's CPU's, reading the loss every epoch (as written), median over
    the pairs with its 95% interval; the threshold is 1."""
    every = _every_epoch(rows)
    if every.empty:
        raise NoFinding(NO_DATA, "No as-written run reading the loss every epoch yet.")
    cpu = every[every["device"] == "cpu"]
    machines = cpu["machine_id"].nunique()
    which = f"on {runs.machine_text(cpu['machine'].iloc[0])}" if machines == 1 else f"median over {machines} machines"
    cpu_text = (f"CPU ({which}): {cpu['us_per_epoch'].median():.0f} µs per epoch, "
                f"{cpu['seconds_per_20k_epochs'].median():.2f} s per {PAPER_EPOCHS:,} epochs." if len(cpu)
                else "No CPU run.")
    written = _variant(rows, AS_WRITTEN)   # every thread setting measured: the pairs carry the fastest CPU too
    pairs = analysis.require(analysis.speedups(written[written["log_every"] == 1] if len(written) else written,
                                               "us_per_epoch"), rows, cpu_text)
    found = stats.ratio(pairs, "us_per_epoch", "cpu_us_per_epoch")
    stated = 1 / analysis.published_cpu_over_gpu(figures)["speedup"].iloc[0]
    evidence = (f"The GPU took {found.value:.2f}x the CPU's time per epoch (median over {len(pairs)} machine(s) and "
                f"GPU(s); above 1 means the CPU is faster; published {stated:.2f}x). {cpu_text} "
                f"{analysis.cpu_baselines(pairs, 'us_per_epoch')}")
    return Finding(found.value > 1, evidence.strip(), interval=found, thresholds=(1.0,))


def reading_barely_matters(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    """Time reading the loss every epoch over never reading it, on the GPU: from the alternated blocks where the
    run has them (their paired t interval, core.experiments.iris.analysis.read_cost), else from the as-written
    runs; the threshold is BARELY. With several GPUs, the median of their ratios and the widest interval (from
    the lowest low end to the highest high end)."""
    costs = [c for c in _device_costs(rows) if c["ratio"] is not None and math.isfinite(c["ratio"].value)]
    if not costs:
        raise NoFinding(NO_DATA, "No run with the alternated read-cost blocks, or both 'every epoch' (1) and "
                                 "'never' (0) intervals, yet.")
    cpu = [c for c in costs if c["key"][-1] == "cpu"]
    gpu = [c for c in costs if c["key"][-1] != "cpu"]
    cpu_text = (f"On the CPU, reading every epoch took {_median_ratio(cpu):.2f}x the time of never reading "
                f"({_costs_text(cpu)})." if cpu else "")
    if not gpu:
        raise NoFinding(NEEDS_GPU, f"No GPU results on any machine yet: run this experiment on a GPU. {cpu_text}")
    found = _combined([c["ratio"] for c in gpu])
    basis = ("alternated blocks in one process" if all(c["cost"] is not None for c in gpu)
             else "separate runs" if not any(c["cost"] is not None for c in gpu) else "alternated blocks where measured")
    stated = figures.set_index("id")
    least = stated.loc[GPU_EVERY_2000]
    return Finding(found.value <= BARELY,
                   f"On the GPU, reading every epoch took {found.value:.2f}x the time of never reading ({basis}; "
                   f"{_costs_text(gpu)}; median over {len(gpu)} GPU(s)). "
                   f"Published: reading every epoch took {stated.loc[GPU_EVERY_EPOCH, 'value'] / least['value']:.2f}x "
                   f"the time of reading every {int(least['log_every']):,} epochs. {cpu_text}".strip(),
                   interval=found, thresholds=(BARELY,))


def _median_ratio(costs: list[dict]) -> float:
    return float(np.median([c["ratio"].value for c in costs]))


def _combined(intervals: list[Interval]) -> Interval:
    """One interval: itself, or over several the median value within the widest interval."""
    if len(intervals) == 1:
        return intervals[0]
    return Interval(float(np.median([i.value for i in intervals])), min(i.low for i in intervals),
                    max(i.high for i in intervals), sum(i.points for i in intervals),
                    sum(i.unresampled for i in intervals))


def _costs_text(costs: list[dict]) -> str:
    """The cost per read of each device, in words ('2.1 µs per read (95% CI 1.2–3.0)'), joined."""
    said = list(dict.fromkeys(read_text(c["cost"]) for c in costs))
    return "; ".join(said)


def hook_only_through_call(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    hooked = hook_checks(rows)
    hooked = hooked[hooked["hook"]]
    if hooked.empty:
        raise NoFinding(NO_DATA, "No hook check with a registered hook yet.")
    via_call = hooked[hooked["call"] == "model(x)"]
    via_forward = hooked[hooked["call"] == "model.forward(x)"]
    holds = bool(len(via_call) and len(via_forward) and (via_call["hook_calls"] == via_call["check_calls"]).all()
                 and (via_forward["hook_calls"] == 0).all())
    return Finding(holds, f"Over {CHECK_CALLS} calls the hook ran {_times(via_call['hook_calls'])} through model(x) "
                          f"and {_times(via_forward['hook_calls'])} through model.forward(x), on each device and "
                          f"machine. One call took {via_call['us_per_call'].median():.1f} µs vs "
                          f"{via_forward['us_per_call'].median():.1f} µs (median).",
                   exact="counts, not timings: no interval")


def _times(counts: pd.Series) -> str:
    """'10 times' where every device and machine counted 10, else '10, 10 and 9 times' (one count each)."""
    values = [f"{int(n):,}" for n in counts]
    if len(set(values)) == 1:
        return f"{values[0]} time{'' if values[0] == '1' else 's'}"
    return f"{', '.join(values[:-1])} and {values[-1]} times"


def read_text(cost: ReadCost | None) -> str:
    """The cost per read in words (ReadCost.text): never a negative cost; where no paired blocks were timed (a run
    without the read-cost point), says so."""
    if cost is None:
        return "the cost per read not measured: no alternated read-cost blocks in this run"
    return cost.text()


CLAIMS = [
    Claim("For a model this small the CPU trains faster than the GPU (loss read every epoch)", gpu_over_cpu,
          "Reproduced means the GPU takes longer per epoch than the CPU of its machine.", (TOTALS,)),
    Claim("How often the loss is read (loss.item(), a synchronising copy) barely changes the GPU's training time",
          reading_barely_matters, f"Reproduced means at most {BARELY:.2f}x.", (GPU_EVERY_EPOCH, GPU_EVERY_2000)),
    Claim("A forward hook runs through model(x) but not through model.forward(x)", hook_only_through_call,
          "Reproduced means the hook ran at every model(x) call and never through model.forward(x).", predictable=False),
]
TABLES = {
    "The cost of reading the loss (per machine and device, latest run)":
        Table(read_costs, {"us_per_epoch_never": "Never read (µs per epoch)",
                           "us_per_epoch_every": "Read every epoch (µs per epoch)", "us_per_read": "Per read (µs)",
                           "read_cost": "Per read, 95% CI (alternated blocks)",
                           "every_vs_never": "Every epoch / never (alternated blocks where timed)",
                           "us_per_epoch_tuned": "Tuned (µs per epoch)"}),
    "Same model from the same start: final training loss":
        Table(same_model, {"final_loss_as_written": "Final loss, as written", "final_loss_tuned": "Final loss, tuned",
                           "tuned_vs_as_written": "|Tuned - as written|", "as_written_vs_cpu": "|As written - CPU|",
                           "host_syncs_as_written": "Host syncs, as written", "host_syncs_tuned": "Host syncs, tuned"}),
    "Hook check: how often the forward hook ran over ten calls":
        Table(hook_checks, {"hook": "Hook registered", "hook_calls": "Hook ran (times)", "check_calls": "Calls",
                            "us_per_call": "Per call (µs)"}),
}
