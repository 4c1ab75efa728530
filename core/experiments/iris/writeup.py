"""How the write-up's Iris timing figures (seed 003: seconds for 20,000 full-batch epochs, the loss read
every k epochs) are replicated by the cost model (core.predict.writeups). A sample is one run of the configured
epochs; its epochs repeat (a read every k of them), so a run of a multiple of k epochs scales to 20,000."""
from core.experiments.iris.experiment import AS_WRITTEN, PAPER_EPOCHS
from core.predict.writeups import Replica

MIN_EPOCHS = 200  # epochs censused: at least this many, and a multiple of the read interval

PRINTED = ("The write-up printed the loss each time it read it (20,000 console lines when every epoch): printing "
           "is Python I/O the census does not see, on either device.")


def epochs_censused(log_every: int) -> int:
    return max(MIN_EPOCHS, log_every)


def replica(figure: str, log_every: int, method: str = "") -> Replica:
    """A figure at one read interval; `method` (printing, which adds time) where the write-up printed."""
    epochs = epochs_censused(log_every)
    reads = "every epoch" if log_every == 1 else f"every {log_every:,} epochs"
    return Replica(figure, AS_WRITTEN, {"log_every": log_every},
                   scale=PAPER_EPOCHS / epochs,
                   how=(f"{PAPER_EPOCHS:,} / {epochs:,} epochs x one predicted run of {epochs:,} epochs (the loss "
                        f"read {reads}): the epochs repeat, so {PAPER_EPOCHS:,} take {PAPER_EPOCHS / epochs:g} "
                        f"times as long (the run's one reset of the weights, a few operations, counted as often)"),
                   overrides={"epochs": epochs, "log_every": (log_every,), "repeats": 1, "variants": (AS_WRITTEN,)},
                   method=method, method_adds=bool(method))


REPLICAS = (
    replica("iris-total.cpu", 1, PRINTED),
    replica("iris-total.gpu", 1, PRINTED),
    replica("iris-total-print200.gpu.log_every200", 200, PRINTED),
    *(replica(f"iris-log-interval.gpu.log_every{k}", k) for k in (100, 200, 1000, 2000)),
)
