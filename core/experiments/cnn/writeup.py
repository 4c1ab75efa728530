"""How the write-ups' timing figures for this page are replicated by the cost model (core.writeups): the 1-D
CNN's 10-epoch times at four batch sizes (seed 000) and the PyTorch MNIST example's (seed 002). An epoch's
steps repeat, so one epoch censused over a few steps scales to the write-up's rows by their ratio."""
from core.experiments.cnn.experiment import AS_WRITTEN
from core.experiments.cnn.model import MODELS
from core.writeups import Replica

EPOCHS = 10                  # the published figures are seconds for 10 epochs
MIN_ROWS, MIN_STEPS = 1024, 4  # rows censused: at least this many, and at least this many steps
MNIST_BATCH = 64             # the MNIST example's default --batch-size

LOOP_UNSEEN = ("The write-up shows its model and data but neither its training loop nor its clock: this predicts "
               "our as-written loop (a DataLoader over a TensorDataset, each batch copied to the device, "
               "loss.item() every step, Adam, the author's optimiser being unstated), in steady epochs.")
START_UP = (" Its 10-epoch times most likely also hold the first epoch's one-off start-up (the CUDA context, "
            "loading cuDNN and cuBLAS), which a steady epoch leaves out.")
MNIST_METHOD = ("The published times (October 2018) most likely came from the MNIST example of that day, a smaller "
                "network (Conv2d(1,10,5), Conv2d(10,20,5), Linear(320,50), Linear(50,10)) than today's example "
                "predicted here, trained on the MNIST files rather than generated images: compare the speedup, "
                "not the seconds.")


def rows_censused(batch: int) -> int:
    return max(MIN_ROWS, MIN_STEPS * batch)


def scale_text(model: str, batch: int) -> str:
    rows, published_rows = rows_censused(batch), MODELS[model].published_rows
    return (f"{EPOCHS} epochs x {published_rows:,} / {rows:,} rows x one predicted epoch of {rows:,} rows "
            f"({rows // batch} steps of {batch}): an epoch's steps repeat, so {published_rows:,} rows take "
            f"{published_rows / rows:g} times as long")


def one_d(figure: str, batch: int, method: str) -> Replica:
    """A figure of the 1-D CNN's batch sweep: only that point's sweep in the configuration."""
    rows = rows_censused(batch)
    return Replica(figure, AS_WRITTEN, {"model": "cnn1d", "batch_size": batch, "rows": rows},
                   scale=EPOCHS * MODELS["cnn1d"].published_rows / rows, how=scale_text("cnn1d", batch),
                   overrides={"models": ("cnn1d",), "rows": rows, "batch_sizes": (batch,), "size_rows": (rows,),
                              "size_batches": (batch,), "epochs": 1, "variants": (AS_WRITTEN,)},
                   method=method)


def mnist(figure: str) -> Replica:
    rows = rows_censused(MNIST_BATCH)
    return Replica(figure, AS_WRITTEN, {"model": "mnist", "batch_size": MNIST_BATCH, "rows": rows},
                   scale=EPOCHS * MODELS["mnist"].published_rows / rows,
                   how=scale_text("mnist", MNIST_BATCH) + f" (at the example's default batch of {MNIST_BATCH})",
                   overrides={"models": ("mnist",), "mnist_rows": rows, "contrast_batch_sizes": (MNIST_BATCH,),
                              "epochs": 1, "variants": (AS_WRITTEN,)},
                   method=MNIST_METHOD)


REPLICAS = (
    *(one_d(f"cnn-10-epochs.gpu.batch_size{b}", b, LOOP_UNSEEN + START_UP) for b in (16, 512, 1024, 4096)),
    *(one_d(f"cnn-10-epochs.cpu.batch_size{b}", b, LOOP_UNSEEN) for b in (16, 512, 1024, 4096)),
    mnist("mnist-10-epochs.gpu.mnist"),
    mnist("mnist-10-epochs.cpu.mnist"),
)
