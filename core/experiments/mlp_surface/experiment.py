"""Experiment 3: the Flux write-up's 2 -> 20 -> 5 -> 1 ReLU network fitted full-batch with Adam to the
peaks surface, on the CPU and on a GPU from the same starting weights; the surfaces each device learns,
and a sample-size sweep that finds where the GPU overtakes the CPU."""
import math

import numpy as np

from core import devices
from core.measure import timing
from core.measure.experiment import Point, RunState, SkipPoint, Variant
from core.present.presented import Presented
from core.experiments.mlp_surface.model import AS_WRITTEN, TUNED, WITH_LOADER, Trainer
from core.params import Param

LOSS_POINTS = 100  # the loss curve is kept at about this many epochs
PROBE_STEPS = 16       # training steps per probe call: the DataLoader variant's first minibatches, else 1 epoch
PROBE_REPEATS = 3
PROBE_BUDGET_S = 2.0   # the probe's timed calls stop after about this long (or max_point_seconds, if shorter)


class MlpSurface(Presented):
    name = "mlp_surface"
    title = "MLP regression surface (peaks)"
    order = 30
    metric_units = {"seconds_per_epoch": "s"}
    source = "001_f0fba680847bcfbd.txt"
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

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        """One call is one training run of the point's epochs, from the seeded weights; the last timed
        run's loss curve, final MSE and (surface points) learned surface are kept."""
        side, epochs = point.params["grid"], point.params["epochs"]
        trainer = Trainer(point.variant, point.device, side, config["seed"], config["lr"], config["batch_size"])
        if not devices.is_stand_in(point.device):  # the stand-in computes nothing: its time says nothing
            _skip_if_too_long(trainer, point.device, epochs, config, run)
        curves = []

        def finish(m: timing.Measurement) -> dict:
            surface = trainer.surface() if point.params["role"] == "surface" else None
            return outcome_metrics(curves[-1], trainer.final_mse(), surface) | {"seconds_per_epoch": m.median / epochs}
        known = {"steps_per_epoch": trainer.steps_per_epoch,
                 "batch_size": config["batch_size"] if point.variant == WITH_LOADER else None,
                 "cuda_graph": trainer.cuda_graph, "cuda_graph_error": trainer.graph_error}
        return timing.Workload(lambda: curves.append(trainer.train(epochs)), unit="epoch", per_call=epochs,
                               repeats=config["repeats"], warmup=0, prewarmed=True, finish=finish, metrics=known)

    def estimate_seconds(self, config: dict, device: str) -> float:
        total = 0.0
        for point in self.points(config, device):
            per_epoch = _epoch_seconds_guess(point.variant, devices.kind(device), point.params["samples"],
                                             config["batch_size"])
            timed = per_epoch * point.params["epochs"] * config["repeats"]
            steps = _steps_per_epoch(point.variant, point.params["samples"], config["batch_size"])
            probe = (1 + PROBE_REPEATS) * min(PROBE_STEPS, steps) * per_epoch / steps
            total += probe + (timed if timed <= config["max_point_seconds"] else 0.0)
        return total


def _point_params(role: str, side: int, epochs: int) -> dict:
    return {"role": role, "grid": side, "samples": side * side, "epochs": epochs}


def _skip_if_too_long(trainer: Trainer, device: str, epochs: int, config: dict, run: RunState) -> None:
    """Warm up and time a few short trainings of at most PROBE_STEPS steps each (one full-batch epoch; the
    DataLoader variant's first minibatches), within PROBE_BUDGET_S (or max_point_seconds), so the probe is
    bounded whatever the point's size; skip the point when the time per step, scaled to the point's timed
    work, exceeds max_point_seconds."""
    steps = min(PROBE_STEPS, trainer.steps_per_epoch)
    probe = run.time(timing.Workload(lambda: trainer.train_steps(steps), unit="step", per_call=steps,
                                     repeats=PROBE_REPEATS, warmup=1,
                                     budget_s=min(PROBE_BUDGET_S, config["max_point_seconds"])), device)
    per_epoch = probe.median / steps * trainer.steps_per_epoch
    estimate = per_epoch * epochs * config["repeats"]
    if estimate > config["max_point_seconds"]:
        raise SkipPoint(f"estimated {estimate:.0f} s for {config['repeats']} x {epochs} epochs, over "
                        f"max_point_seconds={config['max_point_seconds']:g}",
                        estimated_seconds=estimate, estimated_seconds_per_epoch=per_epoch)


def _steps_per_epoch(variant: str, samples: int, batch_size: int) -> int:
    return math.ceil(samples / batch_size) if variant == WITH_LOADER else 1


def _epoch_seconds_guess(variant: str, kind: str, samples: int, batch_size: int) -> float:
    """A rough cost model (a 2-core laptop CPU, a recent GPU) for estimates shown before a run."""
    if variant == WITH_LOADER:  # the DataLoader fetches and collates every sample in Python
        return samples * 1e-5 + _steps_per_epoch(variant, samples, batch_size) * (5e-4 if kind == "cpu" else 3e-4)
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


EXPERIMENT = MlpSurface()
