"""Experiment 3: the Flux write-up's 2 -> 20 -> 5 -> 1 ReLU network fitted full-batch with Adam to the
peaks surface, on the CPU and on a GPU from the same starting weights; the surfaces each device learns,
and a sample-size sweep that finds where the GPU overtakes the CPU."""
import math

import numpy as np
import pandas as pd
import torch

from core import devices, timing
from core.experiments.base import Experiment, Point, SkipPoint, Variant
from core.models.mlp_surface import AS_WRITTEN, SURFACE_GRID, TUNED, WITH_LOADER, Trainer, grid_data
from core.params import Param
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, Verdict, within_factor

LOSS_POINTS = 100  # the loss curve is kept at about this many epochs
PROBE_EPOCHS = 1
PROBE_REPEATS = 3
PAPER_SAMPLES = 40_000
IDENTICAL_FRACTION = 0.05  # surfaces closer than this share of the target's range look identical
SAME_SPEED_FACTOR = 2.0  # "no difference": CPU and GPU within this factor of each other


class MlpSurface(Experiment):
    name = "mlp_surface"
    title = "MLP regression surface (peaks)"
    order = 30
    source = "001_f0fba680847bcfbd.txt"
    claim = ("Training a small 2-20-5-1 network on 40,000 points of the peaks surface for 2,000 epochs is "
             "about 200x faster on the GPU; with 100-200 samples the CPU is faster, with 100-1,000 there is "
             "no difference; a DataLoader slows the GPU down; the same seed gives visually identical "
             "surfaces on both devices.")
    summary = ("The write-up's network (Dense 2→20 relu, 20→5 relu, 5→1, Flux's Glorot-uniform init) fitted "
               "full-batch with Adam (lr 0.08, MSE) to MATLAB's peaks surface sampled on an N x N grid over "
               "[-3, 3]², in PyTorch instead of Julia Flux. Every device starts from the same seeded weights. "
               "The surface run (200 x 200 points for 2,000 epochs at the paper preset) keeps the loss curve, "
               "the final MSE and the surface learned on a 40 x 40 grid; the sweep times a few epochs from 100 "
               "samples up to a million (paper preset) to find the crossover. Variants: **as written** (data on the device, full batch, the "
               "loss read back at every step as Flux.train! does to check it is finite), **with DataLoader** "
               "(a `DataLoader` over a `TensorDataset` on the host, minibatches of `batch_size`, default 1,024, "
               "moved to the device one by one) and **tuned** (no per-step reads: each loss is written to a "
               "device buffer read once at the end; on CUDA the whole step is captured once as a CUDA graph "
               "and replayed). Times exclude a warm-up (and the graph capture), as the write-up excluded "
               "compilation.")
    params = (
        Param("grid", int, 200, "side of the surface run's training grid (grid² samples)", low=2, high=2000),
        Param("epochs", int, 2000, "epochs of the surface run", low=1, high=100_000),
        Param("lr", float, 0.08, "Adam learning rate", low=1e-5, high=1.0),
        Param("sweep_grids", int, (10, 14, 22, 32, 100, 200, 500, 1000),
              "grid sides of the sample-size sweep (side² samples each)", low=2, high=2000, many=True),
        Param("sweep_epochs", int, 20, "epochs timed per sweep point", low=1, high=100_000),
        Param("batch_size", int, 1024, "minibatch size of the DataLoader variant", low=1, high=4_000_000),
        Param("repeats", int, 3, "timed trainings per point", low=1, high=50),
        Param("max_point_seconds", float, 600.0, "skip a point whose timed trainings are estimated to take "
              "longer than this (seconds)", low=0.1, high=86_400.0),
        Param("seed", int, 1, "seed of the starting weights", low=0, high=2**31 - 1),
    )
    presets = {
        "smoke": {"grid": 20, "epochs": 60, "sweep_grids": (10, 20), "sweep_epochs": 3, "repeats": 1,
                  "batch_size": 128, "max_point_seconds": 30.0},
        "quick": {"grid": 100, "epochs": 300, "sweep_grids": (10, 14, 22, 32, 100, 200, 500), "sweep_epochs": 3,
                  "repeats": 3, "max_point_seconds": 15.0},
        "paper": {"grid": 200, "epochs": 2000, "sweep_grids": (10, 14, 22, 32, 100, 200, 500, 1000),
                  "sweep_epochs": 20, "repeats": 3, "max_point_seconds": 600.0},
    }
    variants = (
        Variant(AS_WRITTEN, "full batch, data on the device, the loss read back every step (Flux.train!)"),
        Variant(WITH_LOADER, "minibatches from a DataLoader over a host TensorDataset, moved to the device"),
        Variant(TUNED, "full batch, losses kept on the device and read once; on CUDA a captured CUDA graph"),
    )

    def points(self, config: dict, device: str) -> list[Point]:
        chosen = self.variants_for(config, device)
        surface = [Point(device, v.name, _point_params("surface", config["grid"], config["epochs"]))
                   for v in chosen]
        sweep = [Point(device, v.name, _point_params("sweep", side, config["sweep_epochs"]))
                 for v in chosen for side in config["sweep_grids"]]
        return surface + sweep

    def measure(self, point: Point, config: dict) -> dict:
        side, epochs = point.params["grid"], point.params["epochs"]
        trainer = Trainer(point.variant, point.device, side, config["seed"], config["lr"], config["batch_size"])
        _skip_if_too_long(trainer, point.device, epochs, config)
        curves = []
        m = timing.measure(lambda: curves.append(trainer.train(epochs)), point.device,
                           repeats=config["repeats"], warmup=0)
        surface = trainer.surface() if point.params["role"] == "surface" else None
        metrics = outcome_metrics(curves[-1], trainer.final_mse(), surface)
        metrics |= {"seconds_per_epoch": m.median / epochs, "steps_per_epoch": trainer.steps_per_epoch,
                    "batch_size": config["batch_size"] if point.variant == WITH_LOADER else None,
                    "torch_threads": torch.get_num_threads()}
        return {"timing": m.to_dict(), "metrics": metrics}

    def estimate_seconds(self, config: dict, device: str) -> float:
        total = 0.0
        for point in self.points(config, device):
            per_epoch = _epoch_seconds_guess(point.variant, devices.kind(device), point.params["samples"],
                                             config["batch_size"])
            timed = per_epoch * point.params["epochs"] * config["repeats"]
            probe = (1 + PROBE_REPEATS) * PROBE_EPOCHS * per_epoch
            total += probe + (timed if timed <= config["max_point_seconds"] else 0.0)
        return total


def _point_params(role: str, side: int, epochs: int) -> dict:
    return {"role": role, "grid": side, "samples": side * side, "epochs": epochs}


def _skip_if_too_long(trainer: Trainer, device: str, epochs: int, config: dict) -> None:
    """Warm up, time a few short trainings, and skip the point when their median, scaled to the
    point's timed work, exceeds max_point_seconds."""
    probe = timing.measure(lambda: trainer.train(PROBE_EPOCHS), device, repeats=PROBE_REPEATS, warmup=1)
    per_epoch = probe.median / PROBE_EPOCHS
    estimate = per_epoch * epochs * config["repeats"]
    if estimate > config["max_point_seconds"]:
        raise SkipPoint(f"estimated {estimate:.0f} s for {config['repeats']} x {epochs} epochs, over "
                        f"max_point_seconds={config['max_point_seconds']:g}",
                        estimated_seconds=estimate, estimated_seconds_per_epoch=per_epoch)


def _epoch_seconds_guess(variant: str, kind: str, samples: int, batch_size: int) -> float:
    """A rough cost model (a 2-core laptop CPU, a recent GPU) for estimates shown before a run."""
    if variant == WITH_LOADER:  # the DataLoader fetches and collates every sample in Python
        return samples * 1e-5 + math.ceil(samples / batch_size) * (5e-4 if kind == "cpu" else 3e-4)
    if kind == "cpu":
        return 3e-4 + samples * 3e-7
    return (5e-5 if variant == TUNED else 3e-4) + samples * 2e-9


def outcome_metrics(curve: list[float], final_mse: float, surface: list[float] | None) -> dict:
    """The loss curve (about LOSS_POINTS epochs, 1-based), the final MSE and, unless the run diverged
    (a non-finite loss), the learned surface."""
    diverged = not all(math.isfinite(v) for v in curve) or not math.isfinite(final_mse)
    picked = np.unique(np.linspace(0, len(curve) - 1, min(LOSS_POINTS, len(curve))).round().astype(int))
    metrics = {"diverged": diverged, "final_mse": None if diverged else final_mse,
               "loss_epochs": [int(i) + 1 for i in picked],
               "loss_curve": [curve[i] if math.isfinite(curve[i]) else None for i in picked]}
    if surface is not None and not diverged:
        metrics["surface"] = [round(v, 5) for v in surface]
    return metrics


def target_surface() -> list[float]:
    """The peaks surface on the 40 x 40 evaluation grid, in the learned surfaces' order."""
    return grid_data(SURFACE_GRID)[1].flatten().tolist()


# -- analysis over the records -------------------------------------------------------------------
def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["point_status"] == "ok"] if len(rows) else rows


def has_surface(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray)) and len(value) == SURFACE_GRID**2


def speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """CPU seconds per epoch / accelerator seconds per epoch, for every point measured on both in one run."""
    cols = ["run_id", "machine", "device", "device_name", "variant", "role", "samples", "epochs",
            "cpu_s_per_epoch", "gpu_s_per_epoch", "speedup"]
    ok = _ok(rows)
    if ok.empty or "seconds_per_epoch" not in ok:
        return pd.DataFrame(columns=cols)
    key = ["run_id", "variant", "role", "samples", "epochs"]
    cpu = ok[ok["device"] == "cpu"][key + ["seconds_per_epoch"]]
    cpu = cpu.rename(columns={"seconds_per_epoch": "cpu_s_per_epoch"})
    gpu = ok[ok["device"] != "cpu"].rename(columns={"seconds_per_epoch": "gpu_s_per_epoch"})
    paired = gpu.merge(cpu, on=key)
    paired["speedup"] = paired["cpu_s_per_epoch"] / paired["gpu_s_per_epoch"]
    return paired[cols].reset_index(drop=True)


def crossovers(rows: pd.DataFrame) -> pd.DataFrame:
    """Per run, variant and accelerator: the smallest swept sample count from which it beats the CPU at
    every larger swept size (None when it never does)."""
    sp = speedups(rows)
    sp = sp[sp["role"] == "sweep"]
    out = []
    for (run_id, machine, device, variant), part in sp.groupby(["run_id", "machine", "device", "variant"]):
        part = part.sort_values("samples")
        wins = (part["speedup"] > 1).tolist()
        first = next((s for i, s in enumerate(part["samples"]) if all(wins[i:])), None)
        out.append({"run_id": run_id, "machine": machine, "device": device, "variant": variant,
                    "gpu_faster_from_samples": first, "sizes_compared": len(part)})
    return pd.DataFrame(out, columns=["run_id", "machine", "device", "variant", "gpu_faster_from_samples",
                                      "sizes_compared"])


def surface_differences(rows: pd.DataFrame) -> pd.DataFrame:
    """Per run and variant, the largest |accelerator surface - CPU surface| on the 40 x 40 grid, with
    both final MSEs."""
    cols = ["run_id", "machine", "variant", "device", "samples", "epochs", "cpu_final_mse", "gpu_final_mse",
            "max_abs_surface_diff", "diff_share_of_target_range"]
    ok = _ok(rows)
    if ok.empty or "surface" not in ok:
        return pd.DataFrame(columns=cols)
    learned = ok[(ok["role"] == "surface") & ok["surface"].map(has_surface)]
    target_range = float(np.ptp(target_surface()))
    out = []
    for (run_id, variant), part in learned.groupby(["run_id", "variant"]):
        cpu = part[part["device"] == "cpu"]
        for _, gpu in part[part["device"] != "cpu"].iterrows():
            if cpu.empty:
                continue
            diff = float(np.max(np.abs(np.asarray(gpu["surface"]) - np.asarray(cpu["surface"].iloc[0]))))
            out.append({"run_id": run_id, "machine": gpu["machine"], "variant": variant, "device": gpu["device"],
                        "samples": gpu["samples"], "epochs": gpu["epochs"],
                        "cpu_final_mse": cpu["final_mse"].iloc[0], "gpu_final_mse": gpu["final_mse"],
                        "max_abs_surface_diff": diff, "diff_share_of_target_range": diff / target_range})
    return pd.DataFrame(out, columns=cols)


def final_losses(rows: pd.DataFrame) -> pd.DataFrame:
    """The surface runs' outcome per device and variant: final MSE, whether it diverged, time."""
    cols = ["run_id", "machine", "device", "variant", "samples", "epochs", "final_mse", "diverged",
            "median_s", "seconds_per_epoch"]
    ok = _ok(rows)
    if ok.empty or "final_mse" not in ok:
        return pd.DataFrame(columns=cols)
    return ok[ok["role"] == "surface"][cols].reset_index(drop=True)


def verdicts(rows: pd.DataFrame, published: pd.DataFrame) -> list[Verdict]:
    sp = speedups(rows)
    return [_verdict_200x(rows, sp, published), _verdict_small_cpu_faster(rows, sp), _verdict_no_difference(rows, sp),
            _verdict_gpu_ahead(rows, sp), _verdict_loader(rows, sp), _verdict_identical(rows)]


def _at_paper_size(frame: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Points at 40,000 samples; the surface run's (the longest training) when there is one."""
    if frame.empty:
        return frame
    part = frame[(frame["variant"] == variant) & (frame["samples"] == PAPER_SAMPLES)]
    return part[part["role"] == "surface"] if (part["role"] == "surface").any() else part


def _cpu_epoch_note(rows: pd.DataFrame) -> str:
    ok = _ok(rows)
    if ok.empty:
        return ""
    cpu = _at_paper_size(ok[ok["device"] == "cpu"], AS_WRITTEN)
    if cpu.empty:
        return ""
    per_epoch = cpu["seconds_per_epoch"].median()
    return (f" This machine's CPU trains 40,000 samples in {per_epoch * 1e3:.1f} ms per epoch as written "
            f"({per_epoch * 2000:.1f} s for 2,000 epochs), so a 200x faster GPU would have to do a whole "
            f"training step in {per_epoch / 200 * 1e6:.0f} µs.")


def _no_gpu(rows: pd.DataFrame, claim: str, extra: str = "") -> Verdict:
    """No comparison to make: nothing measured, no GPU rows, or no run that measured both devices."""
    ok = _ok(rows)
    if ok.empty:
        return Verdict(claim, NO_DATA, "No run of this experiment yet.")
    if (ok["device"] == "cpu").all():
        return Verdict(claim, NEEDS_GPU, "No GPU results on any machine yet: run this experiment on a GPU." + extra)
    return Verdict(claim, NO_DATA, "No run measured this on the CPU and a GPU together: run both devices in one "
                                   "run (the comparison pairs points of the same run)." + extra)


def _verdict_200x(rows, sp, published) -> Verdict:
    stated = float(published["value"].iloc[0]) if len(published) else 200.0
    claim = f"Over 2,000 epochs at 40,000 samples the GPU trains about {stated:g}x faster than the CPU"
    mine = _at_paper_size(sp, AS_WRITTEN)
    if mine.empty:
        return _no_gpu(rows, claim, _cpu_epoch_note(rows))
    measured = mine["speedup"].median()
    tuned = _at_paper_size(sp, TUNED)
    tuned_note = f"; tuned (CUDA graph, one read): {tuned['speedup'].median():.1f}x" if len(tuned) else ""
    outcome = REPRODUCED if within_factor(measured, stated) else NOT_REPRODUCED
    return Verdict(claim, outcome, f"Measured {measured:.1f}x as written (CPU time per epoch / GPU time per "
                                   f"epoch, median over {len(mine)} pair(s)){tuned_note}. Reproduced means within "
                                   f"a factor of 2 of {stated:g}x. The ratio is only as large as the CPU "
                                   f"baseline is slow." + _cpu_epoch_note(rows))


def _swept(sp: pd.DataFrame, low: int, high: int) -> pd.DataFrame:
    sweep = sp[(sp["variant"] == AS_WRITTEN) & (sp["role"] == "sweep")] if len(sp) else sp
    return sweep[(sweep["samples"] >= low) & (sweep["samples"] <= high)]


def _sizes(part: pd.DataFrame) -> str:
    return ", ".join(f"{s:,}: {x:.2f}x" for s, x in part.groupby("samples")["speedup"].median().items())


def _verdict_small_cpu_faster(rows, sp) -> Verdict:
    claim = "With 100-200 samples the CPU trains faster than the GPU"
    part = _swept(sp, 100, 200)
    if part.empty:
        return _no_gpu(rows, claim) if sp.empty else Verdict(claim, NO_DATA, "No swept size from 100 to 200 samples.")
    outcome = REPRODUCED if (part["speedup"] < 1).all() else NOT_REPRODUCED
    return Verdict(claim, outcome, f"GPU speed-up over the CPU as written (below 1: the CPU is faster) at "
                                   f"{_sizes(part)}.")


def _verdict_no_difference(rows, sp) -> Verdict:
    claim = "With 100-1,000 samples there is no difference between the CPU and the GPU"
    part = _swept(sp, 100, 1000)
    if part.empty:
        return _no_gpu(rows, claim) if sp.empty else Verdict(claim, NO_DATA, "No swept size from 100 to 1,000.")
    same = part["speedup"].map(lambda x: within_factor(x, 1.0, SAME_SPEED_FACTOR)).all()
    return Verdict(claim, REPRODUCED if same else NOT_REPRODUCED,
                   f"GPU speed-up over the CPU as written at {_sizes(part)}. No difference means within a factor "
                   f"of {SAME_SPEED_FACTOR:g} either way at every size.")


def _verdict_gpu_ahead(rows, sp) -> Verdict:
    claim = "With 40,000 samples the advantage is on the GPU side"
    mine = _at_paper_size(sp, AS_WRITTEN)
    if mine.empty:
        return _no_gpu(rows, claim)
    measured = mine["speedup"].median()
    return Verdict(claim, REPRODUCED if measured > 1 else NOT_REPRODUCED,
                   f"The GPU trains {measured:.2f}x as fast as the CPU at 40,000 samples (as written).")


def _verdict_loader(rows, sp) -> Verdict:
    claim = "Feeding the GPU from a DataLoader slows training down"
    ok = _ok(rows)
    gpu = ok[(ok["device"] != "cpu") & (ok["samples"] == PAPER_SAMPLES)] if len(ok) else ok
    if gpu.empty:
        return _no_gpu(rows, claim)
    per_epoch = gpu.groupby("variant")["seconds_per_epoch"].median()
    if WITH_LOADER not in per_epoch or AS_WRITTEN not in per_epoch:
        return Verdict(claim, NO_DATA, "No GPU point of both variants at 40,000 samples (a skipped point has no time).")
    ratio = per_epoch[WITH_LOADER] / per_epoch[AS_WRITTEN]
    return Verdict(claim, REPRODUCED if ratio > 1 else NOT_REPRODUCED,
                   f"On the GPU at 40,000 samples an epoch with the DataLoader takes {ratio:.1f}x as long as the "
                   f"full-batch epoch.")


def _verdict_identical(rows) -> Verdict:
    claim = "The same seed gives visually identical surfaces on the CPU and the GPU"
    diffs = surface_differences(rows)
    diffs = diffs[diffs["variant"] == AS_WRITTEN]
    if diffs.empty:
        return _no_gpu(rows, claim)
    worst = diffs.loc[diffs["max_abs_surface_diff"].idxmax()]
    same = worst["diff_share_of_target_range"] <= IDENTICAL_FRACTION
    return Verdict(claim, REPRODUCED if same else NOT_REPRODUCED,
                   f"Largest |GPU - CPU| on the 40 x 40 grid: {worst['max_abs_surface_diff']:.4f} "
                   f"({worst['diff_share_of_target_range']:.1%} of the target's range; identical means at most "
                   f"{IDENTICAL_FRACTION:.0%}). Final MSE: CPU {worst['cpu_final_mse']:.4f}, "
                   f"GPU {worst['gpu_final_mse']:.4f}.")


EXPERIMENT = MlpSurface()
