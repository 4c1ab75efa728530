"""How the write-up's TabNet timing figures (seed 000: seconds for 10 epochs of fit on 1,000,000 rows at four
batch sizes) are replicated by the cost model (core.writeups). A sample is one epoch's loader wait and
training steps; an epoch's batches repeat, so a few censused batches scale to the write-up's rows."""
from core.experiments.tabnet.experiment import AS_WRITTEN, WRITEUP_EPOCHS, WRITEUP_ROWS
from core.writeups import Replica

MIN_ROWS, MIN_BATCHES = 1024, 4  # rows censused: at least this many, and at least this many batches
CENSUS_EPOCHS = 2                # the fewest a configuration allows; each is a sample

METHOD = ("The write-up timed '10 epochs of training' of the library's fit and shows no clock; fit also scores an "
          "evaluation set after every epoch (when given one) and runs a feature-importance pass over the training "
          "rows after the last, both outside the epoch predicted here, and in the write-up's figure if its clock "
          "was around the whole call.")


def rows_censused(batch: int) -> int:
    return max(MIN_ROWS, MIN_BATCHES * batch)


def replica(figure: str, batch: int) -> Replica:
    rows = rows_censused(batch)
    return Replica(figure, AS_WRITTEN, {"batch_size": batch},
                   scale=WRITEUP_EPOCHS * WRITEUP_ROWS / rows,
                   how=(f"{WRITEUP_EPOCHS} epochs x {WRITEUP_ROWS:,} / {rows:,} rows x one predicted epoch of "
                        f"{rows:,} rows ({rows // batch} batches of {batch}): an epoch's batches repeat, so "
                        f"{WRITEUP_ROWS:,} rows take {WRITEUP_ROWS / rows:g} times as long"),
                   overrides={"batch_sizes": (batch,), "rows": rows, "epochs": CENSUS_EPOCHS,
                              "variants": (AS_WRITTEN,)},
                   method=METHOD)


REPLICAS = tuple(replica(f"tabnet-10-epochs.{device}.batch_size{b}", b)
                 for device in ("gpu", "cpu") for b in (128, 512, 1024, 4096))
