"""How the write-up's TabNet timing figures (seed 000: seconds for 10 epochs of fit on 1,000,000 rows at four
batch sizes) are replicated by the cost model (core.predict.writeups). A sample is one epoch's loader wait and
training steps; an epoch's batches repeat, so a few censused batches scale to the write-up's rows."""
from core.experiments.tabnet.experiment import AS_WRITTEN, WRITEUP_EPOCHS, WRITEUP_ROWS
from core.predict.writeups import Replica, epochs_of_rows

CENSUS_EPOCHS = 2  # the fewest a configuration allows; each is a sample

METHOD = ("The write-up timed '10 epochs of training' of the library's fit and shows no clock; fit also scores an "
          "evaluation set after every epoch (when given one) and runs a feature-importance pass over the training "
          "rows after the last, both outside the epoch predicted here, and in the write-up's figure if its clock "
          "was around the whole call.")


def replica(figure: str, batch: int) -> Replica:
    epochs = epochs_of_rows(WRITEUP_EPOCHS, WRITEUP_ROWS, batch)
    return Replica(figure, AS_WRITTEN, {"batch_size": batch}, scale=epochs.scale, how=epochs.how,
                   overrides={"batch_sizes": (batch,), "rows": epochs.rows, "epochs": CENSUS_EPOCHS,
                              "variants": (AS_WRITTEN,)},
                   method=METHOD, method_adds=True)


REPLICAS = tuple(replica(f"tabnet-10-epochs.{device}.batch_size{b}", b)
                 for device in ("gpu", "cpu") for b in (128, 512, 1024, 4096))
