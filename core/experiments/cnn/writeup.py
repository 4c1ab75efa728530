"""How the write-ups' timing figures for this page are replicated by the cost model (core.predict.writeups): the 1-D
CNN's 10-epoch times at four batch sizes (seed 000) and the PyTorch MNIST example's (seed 002). An epoch's
steps repeat, so one epoch censused over a few steps scales to the write-up's rows by their ratio. The GRU's
gain (seed 000, about 100x) is one such epoch on each device."""
from core.experiments.cnn.experiment import AS_WRITTEN
from core.experiments.cnn.model import GRU_HIDDEN, MODELS, SEQUENCE_FEATURES, SEQUENCE_STEPS
from core.predict.writeups import Replica, Speedup, epoch_rows, epochs_of_rows

EPOCHS = 10  # the published figures are seconds for 10 epochs
MNIST_BATCH = 64  # the MNIST example's default --batch-size

LOOP_UNSEEN = ("The write-up shows its model and data but neither its training loop nor its clock: this predicts "
               "our as-written loop (a DataLoader over a TensorDataset, each batch copied to the device, "
               "loss.item() every step, Adam, the author's optimiser being unstated), in steady epochs.")
START_UP = (" Its 10-epoch times most likely also hold the first epoch's one-off start-up (the CUDA context, "
            "loading cuDNN and cuBLAS), which a steady epoch leaves out.")
MNIST_METHOD = ("The published times (October 2018) most likely came from the MNIST example of that day, a smaller "
                "network (Conv2d(1,10,5), Conv2d(10,20,5), Linear(320,50), Linear(50,10)) than today's example "
                "predicted here, trained on the MNIST files rather than generated images: compare the speedup, "
                "not the seconds.")


def one_d(figure: str, batch: int, method: str, adds: bool = False) -> Replica:
    """A figure of the 1-D CNN's batch sweep: only that point's sweep in the configuration. `adds`: `method` ends
    with time the published figure holds and the prediction does not (START_UP)."""
    epochs = epochs_of_rows(EPOCHS, MODELS["cnn1d"].published_rows, batch)
    return Replica(figure, AS_WRITTEN, {"model": "cnn1d", "batch_size": batch, "rows": epochs.rows},
                   scale=epochs.scale, how=epochs.how,
                   overrides={"models": ("cnn1d",), "rows": epochs.rows, "batch_sizes": (batch,),
                              "size_rows": (epochs.rows,), "size_batches": (batch,), "epochs": 1,
                              "variants": (AS_WRITTEN,)},
                   method=method, method_adds=adds)


def mnist(figure: str) -> Replica:
    epochs = epochs_of_rows(EPOCHS, MODELS["mnist"].published_rows, MNIST_BATCH)
    return Replica(figure, AS_WRITTEN, {"model": "mnist", "batch_size": MNIST_BATCH, "rows": epochs.rows},
                   scale=epochs.scale, how=epochs.how + f" (at the example's default batch of {MNIST_BATCH})",
                   overrides={"models": ("mnist",), "mnist_rows": epochs.rows, "contrast_batch_sizes": (MNIST_BATCH,),
                              "epochs": 1, "variants": (AS_WRITTEN,)},
                   method=MNIST_METHOD)


GRU_BATCH = 512  # the largest of the quick preset's contrast batches: the write-up states none
GRU_UNSEEN = ("The write-up names a 'multi-feature GRU' but shows neither the model nor its batch or clock: this "
              "predicts our GRU at our batch.")


def gru_gain() -> Speedup:
    rows = epoch_rows(GRU_BATCH)
    return Speedup("gru-gain.gpu.gru", AS_WRITTEN, AS_WRITTEN, {"model": "gru", "batch_size": GRU_BATCH, "rows": rows},
                   how=(f"one epoch of {rows:,} sequences ({rows // GRU_BATCH} batches of {GRU_BATCH}) on each side, "
                        f"our GRU ({SEQUENCE_FEATURES} features, {GRU_HIDDEN} hidden units, {SEQUENCE_STEPS} steps). "
                        "On the GPU side the stand-in counts nn.GRU as cuDNN runs it: one call each way, a GEMM and a "
                        "fused element-wise kernel per step"),
                   overrides={"models": ("gru",), "gru_rows": rows, "contrast_batch_sizes": (GRU_BATCH,), "epochs": 1,
                              "variants": (AS_WRITTEN,)},
                   method=GRU_UNSEEN)


REPLICAS = (
    *(one_d(f"cnn-10-epochs.gpu.batch_size{b}", b, LOOP_UNSEEN + START_UP, adds=True)
      for b in (16, 512, 1024, 4096)),
    *(one_d(f"cnn-10-epochs.cpu.batch_size{b}", b, LOOP_UNSEEN) for b in (16, 512, 1024, 4096)),
    mnist("mnist-10-epochs.gpu.mnist"),
    mnist("mnist-10-epochs.cpu.mnist"),
    gru_gain(),
)
