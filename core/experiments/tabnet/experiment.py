"""Experiment 2: pytorch-tabnet's TabNetRegressor with the write-up's hyper-parameters, fitted through
the library's own `fit` on the 1-D CNN write-up's random data. A callback of ours times every epoch,
so the wait for the data loader, the training steps, the evaluation set and the feature-importance
pass at the end of `fit` are each recorded apart."""
import contextlib
import io
import warnings

import numpy as np
import pandas as pd
import torch

from core import datasets, devices, timing
from core.experiments.base import Experiment, Point, Variant
from core.params import ConfigError, Param
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, Verdict

with warnings.catch_warnings():
    # pytorch-tabnet 4.1 imports spmatrix from scipy.sparse.base, deprecated since SciPy 1.8
    warnings.filterwarnings("ignore", message=".*scipy.sparse.base.*", category=DeprecationWarning)
    from pytorch_tabnet.callbacks import Callback
    from pytorch_tabnet.tab_model import TabNetRegressor

AS_WRITTEN, TUNED = "as written", "tuned"
# The write-up's constructor call; `seed` (the author's 0) comes from the config.
WRITEUP_HYPERPARAMETERS = {"n_d": 17, "n_a": 17, "n_steps": 1, "gamma": 1.5, "n_independent": 2, "n_shared": 2}
WRITEUP_ROWS = 1_000_000
WRITEUP_EPOCHS = 10
LIBRARY_VIRTUAL_BATCH = 128  # fit()'s default virtual_batch_size
GAIN_RANGE = (1.3, 2.0)      # "30% to 100%" faster on the GPU
PARTS = ("setup", "loader", "steps", "evaluation", "importance")


class Tabnet(Experiment):
    name = "tabnet"
    title = "TabNet (pytorch-tabnet)"
    order = 20
    source = "000_3ce040413bd53071.txt"
    claim = ("Training pytorch-tabnet's TabNetRegressor for 10 epochs on 1,000,000 random rows, the GPU's "
             "gain grows with the batch size (about 100% at 4096) but stays modest overall, between 30% "
             "and 100%.")
    summary = ("`TabNetRegressor(n_d=17, n_a=17, n_steps=1, gamma=1.5, n_independent=2, n_shared=2, "
               "seed=0)` fitted with the library's own `fit` on random data (84 features, 1 target, a "
               "2,000-row evaluation set), at batch sizes 128 to 4096. A callback of ours reads a "
               "synchronised clock at the library's hooks: per epoch, the wait for the data loader, the "
               "training steps, and the evaluation after the last batch; around training, the setup and "
               "the feature-importance pass. Time per epoch is the loader wait plus the steps, after an "
               "untimed one-epoch warm-up fit. `as written` is the author's call with the library's defaults; "
               "`tuned` follows the library's own advice for speed: a larger virtual batch, no "
               "importance pass, DataLoader workers and pinned memory on a GPU.")
    params = (
        Param("batch_sizes", int, (128, 512, 1024, 4096), "training batch sizes", low=2, high=65536, many=True),
        Param("rows", int, 12288, "training rows (the write-up: 1,000,000)", low=256, high=4_000_000),
        Param("epochs", int, 3, "timed epochs per fit (the write-up: 10)", low=2, high=50),
        Param("tuned_virtual_batch_size", int, 1024,
              "ghost batch norm chunk of the tuned variant (capped at the batch size)", low=2, high=65536),
        Param("cuda_workers", int, 2, "DataLoader workers of the tuned variant on a GPU (0 on the CPU)",
              low=0, high=32),
        Param("seed", int, 0, "seed of the data and of TabNet (the write-up: 0)", low=0, high=2**31 - 1),
    )
    presets = {
        "smoke": {"batch_sizes": (128, 512), "rows": 1024, "epochs": 2, "tuned_virtual_batch_size": 512},
        "quick": {"batch_sizes": (128, 512, 1024, 4096), "rows": 12288, "epochs": 3},
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

    def measure(self, point: Point, config: dict) -> dict:
        size = point.params["batch_size"]
        options = fit_options(point.variant, size, point.device, config)
        fit = fit_and_time(point.device, config, options)
        train = [e["loader_s"] + e["steps_s"] for e in fit["epochs"]]
        m = timing.Measurement(tuple(train))
        batches = fit["epochs"][0]["batches"]
        metrics = {
            "rows": config["rows"], "epochs_run": len(train), "batches_per_epoch": batches,
            **{k: v for k, v in options.items() if k != "batch_size"},
            "epoch_train_s": train,
            "epoch_loader_s": [e["loader_s"] for e in fit["epochs"]],
            "epoch_eval_s": [e["eval_s"] for e in fit["epochs"]],
            "setup_s": fit["setup_s"], "loader_s": sum(e["loader_s"] for e in fit["epochs"]),
            "steps_s": sum(e["steps_s"] for e in fit["epochs"]),
            "evaluation_s": sum(e["eval_s"] for e in fit["epochs"]), "importance_s": fit["importance_s"],
            "fit_s": fit["fit_s"],
            "train_10_epochs_s": WRITEUP_EPOCHS * m.median,
            "projected_10_epochs_s": WRITEUP_EPOCHS * m.median / batches * (WRITEUP_ROWS // size),
            "loss_curve": fit["loss"], "final_train_loss": fit["loss"][-1], "final_eval_mse": fit["eval_mse"][-1],
            "torch_threads": torch.get_num_threads(), "library_warnings": fit["warnings"],
        }
        return {"timing": m.to_dict(), "metrics": metrics}

    def estimate_seconds(self, config: dict, device: str) -> float:
        """Per batch: a fixed cost, one per ghost batch norm chunk, and the rows (loader and arithmetic);
        per fit, the warm-up, the evaluation set and, as written, the importance pass over the rows."""
        fixed, per_chunk, per_row = (3e-3, 2e-4, 1e-5) if devices.kind(device) != "cpu" else (4e-3, 4e-4, 3e-5)
        seconds = 0.0
        for variant in self.variants_for(config, device):
            for size in config["batch_sizes"]:
                chunks = size // virtual_batch_size(variant.name, size, config)
                batches = (config["epochs"] * config["rows"] + 2 * size) // size
                importance = config["rows"] * per_row if variant.name == AS_WRITTEN else 0.0
                seconds += batches * (fixed + per_chunk * chunks + per_row * size) + importance + 1.0
        return seconds


def virtual_batch_size(variant: str, batch_size: int, config: dict) -> int:
    wanted = LIBRARY_VIRTUAL_BATCH if variant == AS_WRITTEN else config["tuned_virtual_batch_size"]
    return min(wanted, batch_size)


def fit_options(variant: str, batch_size: int, device: str, config: dict) -> dict:
    """The keyword arguments of `fit` for a variant: the library's defaults as written; tuned, the
    speed advice of its docs and issues, with loader workers only where the model is not on the CPU."""
    on_gpu = devices.kind(device) != "cpu"
    tuned = variant == TUNED
    return {"batch_size": batch_size, "virtual_batch_size": virtual_batch_size(variant, batch_size, config),
            "num_workers": config["cuda_workers"] if tuned and on_gpu else 0,
            "pin_memory": on_gpu, "drop_last": True, "compute_importance": not tuned}


@contextlib.contextmanager
def _quiet_fit():
    """Collect what fit warns (the messages are recorded) and swallow what it prints: its early
    stopping callback prints a summary at the end of every fit whatever `verbose` says."""
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        yield caught


class EpochTimer(Callback):
    """Reads a device-synchronised clock at the library's hooks. Per epoch: the wait for the loader
    before each batch, the training steps, and everything after the last batch until the epoch ends
    (the evaluation set, the other callbacks' epoch-end work). fit reads the loss of every batch,
    which synchronises anyway, so the clock reads add no stall."""

    def __init__(self, device: str):
        super().__init__()
        self.read = timing.clock(device)
        self.epochs = []
        self.train_begin = self.train_end = None

    def on_train_begin(self, logs=None):
        self.train_begin = self.read()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = {"loader_s": 0.0, "steps_s": 0.0, "eval_s": 0.0, "batches": 0}
        self._mark = self.read()

    def on_batch_begin(self, batch, logs=None):
        now = self.read()
        self._epoch["loader_s"] += now - self._mark
        self._mark = now

    def on_batch_end(self, batch, logs=None):
        now = self.read()
        self._epoch["steps_s"] += now - self._mark
        self._epoch["batches"] += 1
        self._mark = now

    def on_epoch_end(self, epoch, logs=None):
        self._epoch["eval_s"] = self.read() - self._mark
        self.epochs.append(self._epoch)

    def on_train_end(self, logs=None):
        self.train_end = self.read()


def numpy_data(rows: int, seed: int) -> tuple[np.ndarray, ...]:
    """The shared random data as the float32 arrays fit expects."""
    return tuple(t.numpy() for t in datasets.random_regression(rows, seed))


def new_model(device: str, seed: int):
    # device_name: pytorch-tabnet hands 'cpu' and 'cuda:N' to torch.device as they are, but turns 'cuda'
    # into 'cpu' without a word when CUDA is missing; ours are always explicit ('cpu', 'cuda:N').
    model = TabNetRegressor(**WRITEUP_HYPERPARAMETERS, seed=seed, device_name=device, verbose=0)
    if model.device != torch.device(device):
        raise RuntimeError(f"pytorch-tabnet put the model on {model.device}, not {device}")
    return model


def fit_and_time(device: str, config: dict, options: dict) -> dict:
    """An untimed one-epoch fit on a slice of the data first, to take the one-time costs (the lazy
    import of torch._dynamo by the first optimiser, the CUDA context and kernels, the allocator); then
    the fit of a fresh model (same seed: the same initial weights on every device), timed."""
    x, y, x_eval, y_eval = numpy_data(config["rows"], config["seed"])
    warm = 2 * options["batch_size"]
    timer, read = EpochTimer(device), timing.clock(device)
    with _quiet_fit() as caught:
        new_model(device, config["seed"]).fit(x[:warm], y[:warm], eval_set=[(x_eval[:warm], y_eval[:warm])],
                                              max_epochs=1, **options)
        model = new_model(device, config["seed"])
        start = read()
        model.fit(x, y, eval_set=[(x_eval, y_eval)], max_epochs=config["epochs"], callbacks=[timer], **options)
        end = read()
    if not timer.epochs or timer.epochs[0]["batches"] == 0:
        raise RuntimeError("fit trained no batch")
    return {"epochs": timer.epochs, "setup_s": timer.train_begin - start, "importance_s": end - timer.train_end,
            "fit_s": end - start, "loss": [float(v) for v in model.history["loss"]],
            "eval_mse": [float(v) for v in model.history["val_0_mse"]],
            "warnings": sorted({f"{w.category.__name__}: {w.message}" for w in caught})}


# -- analysis over the records -------------------------------------------------------------------
def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["point_status"] == "ok"] if len(rows) else rows


def speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """CPU time per epoch / GPU time per epoch, per run, variant, GPU and batch size (one run holds
    both devices at the same configuration)."""
    columns = ["run_id", "machine", "device", "device_name", "variant", "batch_size", "cpu_s", "gpu_s", "speedup"]
    ok = _ok(rows)
    out = []
    for (run_id, variant), part in ok.groupby(["run_id", "variant"]):
        cpu = part[part["device"] == "cpu"].set_index("batch_size")["median_s"]
        for _, r in part[part["device"].str.startswith("cuda")].iterrows():
            if r["batch_size"] in cpu.index:
                cpu_s = float(cpu[r["batch_size"]])
                out.append({"run_id": run_id, "machine": r["machine"], "device": r["device"],
                            "device_name": r["device_name"], "variant": variant, "batch_size": r["batch_size"],
                            "cpu_s": cpu_s, "gpu_s": r["median_s"], "speedup": cpu_s / r["median_s"]})
    return pd.DataFrame(out, columns=columns)


def published_speedups(published: pd.DataFrame) -> pd.DataFrame:
    """The write-up's CPU seconds / GPU seconds per batch size."""
    by_device = published.pivot_table(index="batch_size", columns="device", values="value")
    return (by_device["CPU"] / by_device["GPU"]).rename("speedup").reset_index()


def time_split(rows: pd.DataFrame) -> pd.DataFrame:
    """Seconds of each part of one fit (setup, loader wait, steps, evaluation, importance), long form."""
    ok = _ok(rows)
    keep = ["run_id", "machine_id", "machine", "device", "variant", "batch_size", "rows", "epochs_run"]
    if ok.empty:
        return pd.DataFrame(columns=keep + ["part", "seconds"])
    long = ok.melt(id_vars=keep, value_vars=[f"{p}_s" for p in PARTS], var_name="part", value_name="seconds")
    return long.assign(part=long["part"].str.removesuffix("_s"))


def final_losses(rows: pd.DataFrame) -> pd.DataFrame:
    """Training loss after the last epoch per batch size, one column per variant and device: a CPU and
    a GPU fit of one configuration should land close together."""
    ok = _ok(rows)
    if ok.empty or "final_train_loss" not in ok:
        return pd.DataFrame()
    table = ok.assign(fit=ok["variant"] + " · " + ok["device"]).pivot_table(
        index=["run_id", "batch_size"], columns="fit", values="final_train_loss")
    return table.reset_index().rename_axis(columns=None)


def verdicts(rows: pd.DataFrame, published: pd.DataFrame) -> list[Verdict]:
    theirs = published_speedups(published).set_index("batch_size")["speedup"]
    sp = speedups(rows)
    sp = sp[sp["variant"] == AS_WRITTEN]
    grows = "The GPU's gain grows with the batch size (about 100% at 4096)"
    modest = "The GPU's gain stays modest: 30% to 100% faster than the CPU"
    if _ok(rows).empty:
        return [Verdict(c, NO_DATA, "No run yet.") for c in (grows, modest)]
    if sp.empty:
        return [Verdict(c, NEEDS_GPU, "No run with both the CPU and a GPU yet: run this experiment on a "
                                      "machine with a GPU, both devices in one run.") for c in (grows, modest)]
    by_size = sp.groupby("batch_size")["speedup"].median().sort_index()
    listed = ", ".join(f"{s}: {v:.2f}x" for s, v in by_size.items())
    stated = ", ".join(f"{s}: {v:.2f}x" for s, v in theirs.items())
    growing = len(by_size) > 1 and by_size.iloc[-1] > by_size.iloc[0]
    low, high = GAIN_RANGE
    best = by_size.max()
    return [
        Verdict(grows, REPRODUCED if growing else NOT_REPRODUCED,
                f"CPU/GPU time per epoch, as written (median over {sp['run_id'].nunique()} run(s)): {listed}. "
                f"Published: {stated}. Reproduced means larger at the largest batch size than at the "
                f"smallest."),
        Verdict(modest, REPRODUCED if low <= best <= high else NOT_REPRODUCED,
                f"The best measured gain, as written, is {best:.2f}x (at batch size {by_size.idxmax()}); "
                f"reproduced means it lies between {low}x and {high}x. Published: {stated}."),
    ]


EXPERIMENT = Tabnet()
