"""Experiment 2: pytorch-tabnet's TabNetRegressor with the write-up's hyper-parameters, fitted through
the library's own `fit` on the 1-D CNN write-up's random data. A callback of ours marks laps on the
runner's stopwatch at the library's hooks, so the wait for the data loader, the training steps, the
evaluation set and the feature-importance pass at the end of `fit` are each recorded apart."""
import contextlib
import io
import warnings

import numpy as np
import torch

from core import datasets, devices
from core.measure import timing
from core.measure.experiment import (LAST_DATA, MEMORY_FRACTION, Point, RunState, Variant, check_memory, data_resident)
from core.present.presented import Presented
from core.params import ConfigError, Param

from pytorch_tabnet.callbacks import Callback

AS_WRITTEN, TUNED = "as written", "tuned"
# The write-up's constructor call; `seed` (the author's 0) comes from the config.
WRITEUP_HYPERPARAMETERS = {"n_d": 17, "n_a": 17, "n_steps": 1, "gamma": 1.5, "n_independent": 2, "n_shared": 2}
WRITEUP_ROWS = 1_000_000
WRITEUP_EPOCHS = 10
LIBRARY_VIRTUAL_BATCH = 128  # fit()'s default virtual_batch_size
PARTS = ("setup", "loader", "steps", "evaluation", "importance")
OUTSIDE_EPOCHS = "outside epochs"  # the laps between the hooks that belong to no part (never in fit's parts)
# The memory estimate, per training row: the generated data (inputs and target, float32); fit's float32 copy of
# the inputs and its DataLoader's shuffled list of Python ints (measured with the data: 728 bytes); as written,
# the importance pass's explanation and mask in float64, per batch and stacked (measured 2,000 bytes).
DATA_ROW_BYTES = (datasets.FEATURES + 1) * 4
FIT_ROW_BYTES = datasets.FEATURES * 4 + 48
IMPORTANCE_ROW_BYTES = 4 * datasets.FEATURES * 8
SAMPLE_BYTES = 16_000   # per sample of a training batch: activations and their gradients (measured 13 kB)
WORKSPACE_BYTES = 64e6  # the network, Adam's state, the libraries' workspaces (measured 17-26 MB)


class Tabnet(Presented):
    name = "tabnet"
    samples_to_precision = False  # a fit's epochs are its samples (hooks): it runs as many as it is given
    title = "TabNet (pytorch-tabnet)"
    order = 20
    metric_units = {name: "s" for name in ("epoch_eval_s", "epoch_loader_s", "epoch_train_s", "evaluation_s", "fit_s",
                                           "importance_s", "loader_s", "projected_10_epochs_s", "setup_s", "steps_s",
                                           "train_10_epochs_s")}
    source = "000_3ce040413bd53071.txt"
    params = (
        Param("batch_sizes", int, (128, 512, 1024, 4096), "training batch sizes", low=2, high=65536, many=True),
        Param("rows", int, 12288, "training rows (the write-up: 1,000,000)", low=256, high=4_000_000),
        Param("epochs", int, 3, "timed epochs per fit (the write-up: 10)", low=2, high=50),
        Param("tuned_virtual_batch_size", int, 1024,
              "ghost batch norm chunk of the tuned variant (capped at the batch size)", low=2, high=65536),
        Param("cuda_workers", int, 2, "DataLoader workers of the tuned variant on a GPU (0 on the CPU)",
              low=0, high=32),
        Param("seed", int, 0, "seed of the data and of TabNet (the write-up: 0)", low=0, high=2**31 - 1),
        MEMORY_FRACTION,
    )
    presets = {
        "smoke": {"batch_sizes": (128, 512), "rows": 1024, "epochs": 2, "tuned_virtual_batch_size": 512},
        "quick": {"batch_sizes": (128, 512, 1024, 4096), "rows": 12288, "epochs": 5},
        "paper": {"batch_sizes": (128, 512, 1024, 4096), "rows": WRITEUP_ROWS, "epochs": WRITEUP_EPOCHS},
    }
    variants = (
        Variant(AS_WRITTEN, "the author's call: library defaults (virtual batch 128, importance pass, "
                            "no loader workers)", ("cpu", "cuda")),
        Variant(TUNED, "larger virtual batch, no importance pass, loader workers and pinned memory on a GPU",
                ("cpu", "cuda")),
    )

    def validate(self, config: dict) -> None:
        for size in config["batch_sizes"]:
            if size > config["rows"]:
                raise ConfigError("batch_sizes", f"{size} is larger than rows={config['rows']}: fit drops the "
                                                 f"last incomplete batch, so it would train on nothing")
            for variant in config["variants"]:
                chunk = virtual_batch_size(variant, size, config)
                if size % chunk:
                    raise ConfigError("batch_sizes" if variant == AS_WRITTEN else "tuned_virtual_batch_size",
                                      f"the '{variant}' variant's virtual batch size {chunk} does not divide "
                                      f"batch size {size} (pytorch-tabnet's docs require it)")

    def points(self, config: dict, device: str) -> list[Point]:
        return [Point(device, v.name, {"batch_size": size})
                for v in self.variants_for(config, device) for size in config["batch_sizes"]]

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        """One sample per epoch of one timed fit: the loader wait plus the training steps, closed by our
        callback at the library's hooks; an untimed one-epoch fit on a slice first (setup). A point
        estimated not to fit `memory_fraction` of the free memory is skipped before its data is generated."""
        options = fit_options(point.variant, point.params["batch_size"], point.device, config)
        data_key = (config["rows"], config["seed"])
        memory = check_memory(point.device, config["memory_fraction"],
                              *memory_need(config["rows"], options, data_resident(run, data_key)))
        fit = TimedFit(point.device, config, options)
        run.memo[LAST_DATA] = data_key
        return timing.Workload(fit, unit="epoch", per_call=1, hooks=True, setup=fit.warm_up, finish=fit.metrics,
                               metrics={"rows": config["rows"],
                                        **{k: v for k, v in options.items() if k != "batch_size"}} | memory)

    def estimate_seconds(self, config: dict, device: str) -> float:
        """Per batch: a fixed cost, one per ghost batch norm chunk, and the rows (loader and arithmetic);
        per fit, the warm-up, the evaluation set and, as written, the importance pass over the rows."""
        fixed, per_chunk, per_row = (3e-3, 2e-4, 1e-5) if devices.is_accelerator(device) else (4e-3, 4e-4, 3e-5)
        seconds = 0.0
        for variant in self.variants_for(config, device):
            for size in config["batch_sizes"]:
                chunks = size // virtual_batch_size(variant.name, size, config)
                batches = (config["epochs"] * config["rows"] + 2 * size) // size
                importance = config["rows"] * per_row if variant.name == AS_WRITTEN else 0.0
                seconds += batches * (fixed + per_chunk * chunks + per_row * size) + importance + 1.0
        return seconds


def memory_need(rows: int, options: dict, resident: bool) -> tuple[float, float]:
    """(device bytes, host bytes) of a fit at its peak: a training batch's activations and the network on the
    device; on the host the data with the evaluation set (none when `resident`: the run's last point
    generated it), fit's copy of it and, when fit computes feature importance, the importance pass."""
    data = 0.0 if resident else (rows + datasets.VALIDATION_ROWS) * DATA_ROW_BYTES
    per_row = FIT_ROW_BYTES + (IMPORTANCE_ROW_BYTES if options["compute_importance"] else 0)
    return options["batch_size"] * SAMPLE_BYTES + WORKSPACE_BYTES, data + rows * per_row


def virtual_batch_size(variant: str, batch_size: int, config: dict) -> int:
    wanted = LIBRARY_VIRTUAL_BATCH if variant == AS_WRITTEN else config["tuned_virtual_batch_size"]
    return min(wanted, batch_size)


def fit_options(variant: str, batch_size: int, device: str, config: dict) -> dict:
    """The keyword arguments of `fit` for a variant: the library's defaults as written; tuned, the
    speed advice of its docs and issues, with loader workers only where the model is not on the CPU."""
    on_gpu = devices.is_accelerator(device)
    tuned = variant == TUNED
    return {"batch_size": batch_size, "virtual_batch_size": virtual_batch_size(variant, batch_size, config),
            "num_workers": config["cuda_workers"] if tuned and on_gpu else 0,
            "pin_memory": on_gpu, "drop_last": True, "compute_importance": not tuned}


@contextlib.contextmanager
def _quiet_fit(seen: set):
    """Collect what fit warns into `seen` (the messages are recorded) and swallow what it prints: its
    early stopping callback prints a summary at the end of every fit whatever `verbose` says."""
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        yield
    seen.update(f"{w.category.__name__}: {w.message}" for w in caught)


class EpochTimer(Callback):
    """Marks laps on the runner's stopwatch at the library's hooks. Per epoch: the wait for the loader
    before each batch, the training steps, and everything after the last batch until the epoch ends
    (the evaluation set, the other callbacks' epoch-end work); each epoch's loader wait and steps make
    one sample. fit reads the loss of every batch, which synchronises anyway, so the stopwatch's
    synchronised reads add no stall."""

    def __init__(self, watch: timing.Stopwatch):
        super().__init__()
        self.watch = watch
        self.epochs = []

    def on_train_begin(self, logs=None):
        self.watch.lap("setup")

    def on_epoch_begin(self, epoch, logs=None):
        self.watch.lap(OUTSIDE_EPOCHS)
        self._epoch = {"loader_s": 0.0, "steps_s": 0.0, "eval_s": 0.0, "batches": 0}

    def on_batch_begin(self, batch, logs=None):
        self._epoch["loader_s"] += self.watch.lap("loader")

    def on_batch_end(self, batch, logs=None):
        self._epoch["steps_s"] += self.watch.lap("steps")
        self._epoch["batches"] += 1

    def on_epoch_end(self, epoch, logs=None):
        self._epoch["eval_s"] = self.watch.lap("evaluation")
        self.watch.close_sample("loader", "steps")
        self.epochs.append(self._epoch)

    def on_train_end(self, logs=None):
        self.watch.lap(OUTSIDE_EPOCHS)


def numpy_data(rows: int, seed: int) -> tuple[np.ndarray, ...]:
    """The shared random data as the float32 arrays fit expects."""
    return tuple(t.numpy() for t in datasets.random_regression(rows, seed))


def new_model(device: str, seed: int):
    # imported here: the model's module imports scikit-learn and SciPy (over a second), and every page imports
    # the experiments
    with warnings.catch_warnings():
        # pytorch-tabnet 4.1 imports spmatrix from scipy.sparse.base, deprecated since SciPy 1.8
        warnings.filterwarnings("ignore", message=".*scipy.sparse.base.*", category=DeprecationWarning)
        from pytorch_tabnet.tab_model import TabNetRegressor
    # device_name: pytorch-tabnet hands 'cpu' and 'cuda:N' to torch.device as they are, but turns 'cuda'
    # into 'cpu' without a word when CUDA is missing; ours are always explicit ('cpu', 'cuda:N').
    model = TabNetRegressor(**WRITEUP_HYPERPARAMETERS, seed=seed, device_name=device, verbose=0)
    if model.device != torch.device(device):
        raise RuntimeError(f"pytorch-tabnet put the model on {model.device}, not {device}")
    return model


class TimedFit:
    """One point's fit. `warm_up` (untimed) fits one epoch on a slice first, to take the one-time costs
    (the lazy import of torch._dynamo by the first optimiser, the CUDA context and kernels, the
    allocator); calling it fits a fresh model (same seed: the same initial weights on every device) on
    the runner's stopwatch: setup before `on_train_begin`, the epochs, importance after `on_train_end`."""

    def __init__(self, device: str, config: dict, options: dict):
        self.device, self.seed, self.epochs_wanted, self.options = device, config["seed"], config["epochs"], options
        self.x, self.y, self.x_eval, self.y_eval = numpy_data(config["rows"], config["seed"])
        self.warnings: set[str] = set()
        self.watch = self.timer = self.model = None

    def warm_up(self) -> None:
        warm = 2 * self.options["batch_size"]
        with _quiet_fit(self.warnings):
            new_model(self.device, self.seed).fit(self.x[:warm], self.y[:warm],
                                                  eval_set=[(self.x_eval[:warm], self.y_eval[:warm])],
                                                  max_epochs=1, **self.options)

    def __call__(self, watch: timing.Stopwatch) -> None:
        self.watch, self.timer = watch, EpochTimer(watch)
        with _quiet_fit(self.warnings):
            self.model = new_model(self.device, self.seed)
            watch.start()
            self.model.fit(self.x, self.y, eval_set=[(self.x_eval, self.y_eval)], max_epochs=self.epochs_wanted,
                           callbacks=[self.timer], **self.options)
            watch.lap("importance")
        if not self.epochs or self.epochs[0]["batches"] == 0:
            raise RuntimeError("fit trained no batch")

    @property
    def epochs(self) -> list[dict]:
        """Per timed epoch: loader_s, steps_s, eval_s and the batches trained."""
        return self.timer.epochs

    def metrics(self, m: timing.Measurement) -> dict:
        """Every part of the fit apart, the per-epoch figures, the write-up's scale, losses and warnings."""
        epochs, batches = self.epochs, self.epochs[0]["batches"]
        loss = [float(v) for v in self.model.history["loss"]]
        return {
            "epochs_run": m.n, "batches_per_epoch": batches, "epoch_train_s": list(m.samples),
            "epoch_loader_s": [e["loader_s"] for e in epochs], "epoch_eval_s": [e["eval_s"] for e in epochs],
            "setup_s": self.watch.total("setup"), "loader_s": sum(e["loader_s"] for e in epochs),
            "steps_s": sum(e["steps_s"] for e in epochs), "evaluation_s": sum(e["eval_s"] for e in epochs),
            "importance_s": self.watch.total("importance"), "fit_s": sum(s for _, s in self.watch.laps),
            "train_10_epochs_s": WRITEUP_EPOCHS * m.median,
            "projected_10_epochs_s": WRITEUP_EPOCHS * m.median / batches * (WRITEUP_ROWS // self.options["batch_size"]),
            "loss_curve": loss, "final_train_loss": loss[-1],
            "final_eval_mse": float(self.model.history["val_0_mse"][-1]), "library_warnings": sorted(self.warnings),
        }


EXPERIMENT = Tabnet()
