"""How the write-up's GPU speedup on 40,000 samples (seed 001: about 200x over 2,000 full-batch epochs, compile
and garbage-collection time taken out) is replicated by the cost model (core.predict.writeups): a few as-written epochs
on each side, whose ratio is the 2,000 epochs' because the epochs repeat."""
from core.experiments.mlp_surface.model import AS_WRITTEN
from core.predict.writeups import Speedup

GRID = 200  # the write-up's 200 x 200 grid of inputs
EPOCHS = 3

REPLICAS = (
    Speedup("surface-speedup.gpu.samples40000", AS_WRITTEN, AS_WRITTEN,
            {"role": "sweep", "grid": GRID, "samples": GRID * GRID, "epochs": EPOCHS},
            how=(f"{EPOCHS} full-batch epochs on {GRID * GRID:,} samples on each side (the sweep's point at grid "
                 f"{GRID}): the epochs repeat, so their ratio is that of the write-up's 2,000"),
            overrides={"sweep_grids": (GRID,), "sweep_epochs": EPOCHS, "variants": (AS_WRITTEN,)},
            method=("The write-up trained with Julia's Flux, not PyTorch, and timed @time around the 2,000 epochs "
                    "less their compile and garbage-collection time; this predicts the same network, data and "
                    "loop in PyTorch, whose cost per operation is not Flux's.")),
)
