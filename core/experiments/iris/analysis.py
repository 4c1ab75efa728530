"""The Iris experiment's tables and claims, over the rows frame: what reading the loss costs, whether
tuned learns the same model, and how often a forward hook runs."""
import pandas as pd

from core.present import analysis
from core.store import runs
from core.present.analysis import NEEDS_GPU, NO_DATA, Claim, Finding, NoFinding
from core.experiments.iris.experiment import AS_WRITTEN, CHECK_CALLS, HOOK_CHECK, NEVER, PAPER_EPOCHS, TUNED
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


def read_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, configuration and device (latest run): the per-epoch cost never reading the loss
    and reading it every epoch, the extra time per read (least-squares slope of run time against
    reads), and tuned's per-epoch cost."""
    columns = ["run_id", "machine", "device", "device_name", "us_per_epoch_never", "us_per_epoch_every",
               "us_per_read", "every_vs_never", "us_per_epoch_tuned"]
    latest = analysis.latest(rows)
    written = _variant(latest, AS_WRITTEN)
    if written.empty:
        return pd.DataFrame(columns=columns)
    tuned = _variant(latest, TUNED).set_index(DEVICE_KEYS)["us_per_epoch"]
    out = []
    for key, part in written.groupby(DEVICE_KEYS):
        by_k = part.set_index("log_every")["us_per_epoch"]
        never, every = by_k.get(NEVER), by_k.get(1)
        slope = _slope(part["host_syncs"], part["median_s"]) if part["host_syncs"].nunique() > 1 else None
        out.append({"run_id": part["run_id"].iloc[-1], "machine": part["machine"].iloc[0], "device": key[-1],
                    "device_name": part["device_name"].iloc[0], "us_per_epoch_never": never,
                    "us_per_epoch_every": every, "us_per_read": None if slope is None else slope * 1e6,
                    "every_vs_never": every / never if never and every else None,
                    "us_per_epoch_tuned": tuned.get(key)})
    return pd.DataFrame(out, columns=columns)


def _slope(x: pd.Series, y: pd.Series) -> float:
    x, y = x.astype(float), y.astype(float)
    return float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


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
    """The GPU's time per epoch over its machine's CPU's, reading the loss every epoch (as written)."""
    every = _every_epoch(rows)
    if every.empty:
        raise NoFinding(NO_DATA, "No as-written run reading the loss every epoch yet.")
    cpu = every[every["device"] == "cpu"]
    machines = cpu["machine_id"].nunique()
    which = f"on {runs.machine_text(cpu['machine'].iloc[0])}" if machines == 1 else f"median over {machines} machines"
    cpu_text = (f"CPU ({which}): {cpu['us_per_epoch'].median():.0f} µs per epoch, "
                f"{cpu['seconds_per_20k_epochs'].median():.2f} s per {PAPER_EPOCHS:,} epochs." if len(cpu)
                else "No CPU run.")
    pairs = analysis.require(analysis.speedups(every, "us_per_epoch"), rows, cpu_text)
    ratio = (1 / pairs["speedup"]).median()
    stated = 1 / analysis.published_cpu_over_gpu(figures)["speedup"].iloc[0]
    return Finding(ratio > 1, f"The GPU took {ratio:.2f}x the CPU's time per epoch (median over {len(pairs)} "
                              f"machine(s) and GPU(s); above 1 means the CPU is faster; published "
                              f"{stated:.2f}x). {cpu_text}")


def reading_barely_matters(rows: pd.DataFrame, figures: pd.DataFrame) -> Finding:
    """Time reading the loss every epoch over never reading it, on the GPU."""
    costs = read_costs(rows).dropna(subset=["every_vs_never"])
    if costs.empty:
        raise NoFinding(NO_DATA, "No run with both 'every epoch' (1) and 'never' (0) intervals yet.")
    on_gpu = analysis.on_accelerator(costs)
    cpu, gpu = costs[~on_gpu], costs[on_gpu]
    cpu_text = (f"On the CPU, reading every epoch took {cpu['every_vs_never'].median():.2f}x the time of never "
                f"reading ({read_text(cpu['us_per_read'].median())})." if len(cpu) else "")
    if gpu.empty:
        raise NoFinding(NEEDS_GPU, f"No GPU results on any machine yet: run this experiment on a GPU. {cpu_text}")
    stated = figures.set_index("id")
    least = stated.loc[GPU_EVERY_2000]
    return Finding(gpu["every_vs_never"].median() <= BARELY,
                   f"On the GPU, reading every epoch took {gpu['every_vs_never'].median():.2f}x the time of never "
                   f"reading ({read_text(gpu['us_per_read'].median())}; median over {len(gpu)} GPU(s)). "
                   f"Published: reading every epoch took {stated.loc[GPU_EVERY_EPOCH, 'value'] / least['value']:.2f}x "
                   f"the time of reading every {int(least['log_every']):,} epochs. {cpu_text}")


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
                          f"{via_forward['us_per_call'].median():.1f} µs (median).")


def _times(counts: pd.Series) -> str:
    """'10 times' where every device and machine counted 10, else '10, 10 and 9 times' (one count each)."""
    values = [f"{int(n):,}" for n in counts]
    if len(set(values)) == 1:
        return f"{values[0]} time{'' if values[0] == '1' else 's'}"
    return f"{', '.join(values[:-1])} and {values[-1]} times"


def read_text(us_per_read) -> str:
    """The extra time per read (a slope over the runs' read counts) in words: a slope at or below zero is noise, no
    measurable cost."""
    if us_per_read is None or pd.isna(us_per_read):
        return "the cost per read not measured"
    if us_per_read <= 0:
        return "no measurable cost per read: the runs' times do not grow with their reads"
    return f"{us_per_read:.1f} µs per read"


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
                           "every_vs_never": "Every epoch / never", "us_per_epoch_tuned": "Tuned (µs per epoch)"}),
    "Same model from the same start: final training loss":
        Table(same_model, {"final_loss_as_written": "Final loss, as written", "final_loss_tuned": "Final loss, tuned",
                           "tuned_vs_as_written": "|Tuned - as written|", "as_written_vs_cpu": "|As written - CPU|",
                           "host_syncs_as_written": "Host syncs, as written", "host_syncs_tuned": "Host syncs, tuned"}),
    "Hook check: how often the forward hook ran over ten calls":
        Table(hook_checks, {"hook": "Hook registered", "hook_calls": "Hook ran (times)", "check_calls": "Calls",
                            "us_per_call": "Per call (µs)"}),
}
