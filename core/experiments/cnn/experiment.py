"""Experiment 1: the write-up's 1-D CNN trained on random data, swept over batch size and data size,
with the PyTorch MNIST network (2-D) and a small GRU as contrasts; the author's training loop against
a tuned one, on every device, from the same starting weights. One timed call is one training epoch."""
from typing import Iterator

from core import devices
from core.measure import timing
from core.datasets import VALIDATION_ROWS
from core.measure.experiment import (LAST_DATA, MEMORY_FRACTION, Point, RunState, Variant, check_memory, data_resident)
from core.present.presented import Presented
from core.experiments.cnn.model import (MODELS, TRAINERS, VALIDATION_CHUNK, build, validation_loss,
                                        weights_checksum)
from core.params import ConfigError, Param

MAX_ROWS = 2**24
AS_WRITTEN, TUNED = "as written", "tuned"
# Rough seconds per training step on an idle 2-core CPU (fixed, per sample), for the estimate only.
CPU_STEP_COST = {"cnn1d": (1.3e-3, 4e-6), "mnist": (1e-3, 6e-4), "gru": (1e-3, 1e-4)}
GPU_STEP_COST = (1e-3, 1e-7)
POINT_OVERHEAD_S = 0.5  # building the model and trainer, two validation passes
FLOAT = 4
# Per training row, an epoch's shuffled order: the DataLoader's list of Python ints (RandomSampler's
# randperm().tolist(), a pointer and an int object each), the tuned loop's int64 permutation.
ORDER_BYTES = {AS_WRITTEN: 48, TUNED: 8}
WORKSPACE_BYTES = 64e6  # libraries' workspaces and the allocator's slack (30-45 MB beyond the weights, measured)


class Cnn(Presented):
    name = "cnn"
    title = "1-D CNN, 2-D CNN and GRU training"
    order = 10
    metric_units = {"seconds_10_epochs": "s", "step_s": "s"}
    unpredicted_metrics = ("first_epoch_s",)
    source = "000_3ce040413bd53071.txt"
    params = (
        Param("models", str, tuple(MODELS), "networks: cnn1d (the write-up's 1-D CNN), mnist (the 2-D "
              "contrast), gru (the recurrent contrast)", choices=tuple(MODELS), many=True),
        Param("rows", int, 16384, "training rows of the 1-D batch sweep (a multiple of every batch size)", low=1, high=MAX_ROWS),
        Param("batch_sizes", int, (16, 512, 1024, 4096), "batch sizes of the 1-D batch sweep", low=1,
              high=MAX_ROWS, many=True),
        Param("size_rows", int, (1024, 4096, 16384, 65536), "training rows of the 1-D data-size sweep",
              low=1, high=MAX_ROWS, many=True),
        Param("size_batches", int, (512,), "batch sizes of the 1-D data-size sweep", low=1, high=MAX_ROWS,
              many=True),
        Param("mnist_rows", int, 1024, "synthetic 28x28 images for the MNIST network", low=1, high=2**20),
        Param("gru_rows", int, 4096, "sequences for the GRU", low=1, high=2**22),
        Param("contrast_batch_sizes", int, (64, 512), "batch sizes for the MNIST network and the GRU",
              low=1, high=2**22, many=True),
        Param("epochs", int, 3, "timed epochs per point (a warm-up epoch runs first, timed apart)", low=1, high=100),
        Param("lr", float, 1e-3, "Adam learning rate", low=1e-6, high=1.0),
        Param("seed", int, 0, "seed of the data, the starting weights and the shuffling", low=0, high=2**31 - 1),
        Param("cuda_graph", bool, True, "tuned variant on CUDA: replay each training step as a CUDA graph"),
        MEMORY_FRACTION,
    )
    presets = {
        "smoke": {"models": tuple(MODELS), "rows": 512, "batch_sizes": (64, 512), "size_rows": (128, 512),
                  "size_batches": (64,), "mnist_rows": 32, "gru_rows": 64, "contrast_batch_sizes": (32,),
                  "epochs": 2},
        "quick": {"rows": 16384, "batch_sizes": (16, 512, 1024, 4096), "size_rows": (1024, 4096, 16384, 65536),
                  "size_batches": (512,), "mnist_rows": 1024, "gru_rows": 4096, "contrast_batch_sizes": (64, 512),
                  "epochs": 3},
        "paper": {"rows": 2**20, "batch_sizes": (16, 512, 1024, 4096),
                  "size_rows": (1024, 4096, 16384, 65536, 262144, 2**20), "size_batches": (512, 1024),
                  "mnist_rows": 61440, "gru_rows": 65536, "contrast_batch_sizes": (64, 512, 2048), "epochs": 10},
    }
    variants = (
        Variant(AS_WRITTEN, "the author's loop: DataLoader over a TensorDataset, each batch copied to the "
                            "device, loss.item() every step, Adam"),
        Variant(TUNED, "data resident on the device, device-side permutation and index gather, the loss "
                       "read once per epoch, fused Adam; on CUDA the step replayed as a CUDA graph"),
    )

    def validate(self, config: dict) -> None:
        """Every (rows, batch) pair must hold whole batches only: a batch no larger than the data and
        rows a multiple of it (so every step has one shape, which CUDA graph replay needs)."""
        for (_, rows_field, batch_field), batch, rows in _sweep_points(config):
            if batch > rows:
                raise ConfigError(batch_field, f"batch size {batch} is larger than the data "
                                               f"({rows_field}={rows}); use at most {rows}")
            if rows % batch:
                raise ConfigError(rows_field, f"{rows} rows is not a multiple of batch size {batch} "
                                              f"({batch_field}); every batch must be full: use e.g. "
                                              f"{rows // batch * batch or batch} or {(rows // batch + 1) * batch}")

    def points(self, config: dict, device: str) -> list[Point]:
        return [Point(device, v.name, params) for params in plan(config) for v in self.variants_for(config, device)]

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        """One call trains one epoch; the warm-up epoch (start-up costs included) is kept apart as
        first_epoch_s. Both variants start from the same seeded weights. A point estimated not to fit
        `memory_fraction` of the free memory is skipped before its data is generated."""
        p = point.params
        spec = MODELS[p["model"]]
        model = build(p["model"], config["seed"])
        data_key = (p["model"], p["rows"], config["seed"])
        memory = check_memory(point.device, config["memory_fraction"],
                              *memory_need(point.variant, p["model"], p["rows"], p["batch_size"], point.device,
                                           sum(w.numel() for w in model.parameters()), data_resident(run, data_key)))
        x, y, val_x, val_y = spec.data(p["rows"], config["seed"])
        run.memo[LAST_DATA] = data_key
        model = model.to(point.device)
        trainer = TRAINERS[point.variant](model, spec.loss, x, y, p["batch_size"], point.device, config["seed"],
                                          config["lr"], config["cuda_graph"])
        steps = p["rows"] // p["batch_size"]

        def finish(m: timing.Measurement) -> dict:
            return {"first_epoch_s": m.warmup[0], "step_s": m.median / steps, "seconds_10_epochs": 10 * m.median,
                    "train_loss_final": trainer.train_loss(),
                    "val_loss_final": validation_loss(model, spec.loss, val_x, val_y, point.device)}
        metrics = {"init_weights_checksum": weights_checksum(model),
                   "val_loss_initial": validation_loss(model, spec.loss, val_x, val_y, point.device),
                   "steps_per_epoch": steps, "fused_optimizer": trainer.fused, "cuda_graph": trainer.graphed,
                   "cuda_graph_error": trainer.graph_error} | memory
        return timing.Workload(trainer.epoch, unit="epoch", repeats=config["epochs"], warmup=1, finish=finish,
                               metrics=metrics)

    def estimate_seconds(self, config: dict, device: str) -> float:
        epochs = config["epochs"] + 1  # and the warm-up epoch
        total = 0.0
        for p in plan(config):
            fixed, per_sample = GPU_STEP_COST if devices.is_accelerator(device) else CPU_STEP_COST[p["model"]]
            steps = p["rows"] // p["batch_size"]
            per_variant = epochs * steps * (fixed + per_sample * p["batch_size"]) + POINT_OVERHEAD_S
            total += per_variant * len(self.variants_for(config, device))
        return total


def memory_need(variant: str, model: str, rows: int, batch: int, device: str, parameters: int,
                resident: bool) -> tuple[float, float]:
    """(device bytes, host bytes) of a point at its peak: the generated data on the host (none when
    `resident`: the run's last point built it), the weights with their gradients and Adam's two moments,
    the activations of a training batch or of a validation chunk (the larger; the batch's copy of its rows
    too), the shuffled order and, for the tuned loop on a GPU, the training data copied there."""
    spec = MODELS[model]
    host = 0.0 if resident else spec.building_copies * (rows + VALIDATION_ROWS) * spec.row_bytes
    on_device = (4 * FLOAT * parameters + max(batch, VALIDATION_CHUNK) * (spec.sample_bytes + spec.row_bytes)
                 + WORKSPACE_BYTES)
    order = ORDER_BYTES[variant] * rows
    if variant == AS_WRITTEN:
        return on_device, host + order
    copied = rows * spec.row_bytes if devices.is_accelerator(device) else 0.0
    return on_device + order + copied, host


SWEEPS = (("cnn1d", "rows", "batch_sizes"), ("cnn1d", "size_rows", "size_batches"),
          ("mnist", "mnist_rows", "contrast_batch_sizes"), ("gru", "gru_rows", "contrast_batch_sizes"))


def _sweep_points(config: dict) -> Iterator[tuple[tuple[str, str, str], int, int]]:
    """(sweep, batch, rows) for every point of every sweep the chosen models run; a sweep is (model,
    rows field, batch field), its rows field one count (the batch sweep) or several (the others)."""
    for sweep in SWEEPS:
        model, rows_field, batch_field = sweep
        if model in config["models"]:
            counts = config[rows_field] if isinstance(config[rows_field], tuple) else (config[rows_field],)
            yield from ((sweep, batch, rows) for batch in config[batch_field] for rows in counts)


def plan(config: dict) -> list[dict]:
    """The swept parameters of every point, without duplicates: the 1-D batch sweep, the 1-D data-size
    sweep, then each contrast model at its batch sizes."""
    planned = ((("model", sweep[0]), ("batch_size", batch), ("rows", rows))
               for sweep, batch, rows in _sweep_points(config))
    return [dict(p) for p in dict.fromkeys(planned)]


EXPERIMENT = Cnn()
