from core.charts.mlp_surface import charts
from core.experiments.mlp_surface import crossovers, final_losses, surface_differences, verdicts
from ui.template import experiment_page

EXPLANATION = """
**How small this network is.** 2→20→5→1 has 171 parameters. One full-batch epoch at 40,000 samples
is about 2 x 40,000 x 145 ≈ 12 MFLOP forward and twice that backward: milliseconds on a CPU, a few
microseconds of arithmetic on a GPU. What a GPU pays instead is a fixed price per step: the forward,
the loss, the backward and Adam's update launch a few dozen kernels of a few microseconds each, plus
Python's dispatch of every one. Below some size the step is all overhead on both devices, which is
why the write-up saw the CPU win at 100-200 samples and no difference up to 1,000; the sample-size
sweep shows where the GPU's time per epoch stops being flat on your hardware and where the CPU's line
crosses it.

**Why the 200x depends on the CPU baseline.** A speed-up is a ratio, and this one is only as large as
the CPU side is slow. The write-up states neither its CPU nor its CPU time, only the ratio; its CPU
ran Julia Flux, whose timing included garbage collection of the arrays allocated at every step, and
its GPU time excluded compilation and collection. A CPU that runs the epoch with threaded kernels and
no allocation per step makes the same GPU look far less impressive. The 200x verdict states what one epoch costs
on this machine's CPU and how short a GPU step would have to be to be 200x faster: when that is below
the launch cost of an unfused step (tens of microseconds), only a captured graph (the tuned variant)
can get there.

**The DataLoader.** `DataLoader(TensorDataset(x, y), batch_size=1024)` indexes the dataset one sample
at a time in Python and collates the samples into a batch, then each batch is copied to the device:
tens of thousands of Python calls and 40 small copies per epoch, instead of one resident tensor, and
40 optimiser steps (each with its own launches and loss read) instead of one. The write-up's author
found it slowed the GPU; it slows the CPU too, and it also changes the optimisation (more, noisier
steps), so its final MSE differs from the full-batch variants'.

**Tuned.** The as-written loop reads the loss back at every step (Flux.train! does that to check the
loss is finite), which on a GPU forces the host to wait for every step to finish. The tuned loop writes
each loss into a device buffer read once at the end; on CUDA it also captures the whole step (forward,
backward, Adam with `capturable=True`) once as a CUDA graph and replays it, so one launch replaces the
step's dozens. On the CPU there is nothing to capture and the tuned loop is the same arithmetic.

**Identical starting weights.** The weights are drawn on the CPU from a seeded generator with Flux's
initialisation (Glorot-uniform, zero biases) and copied to each device, so the CPU and GPU runs differ
only in floating-point rounding (different kernels sum in different orders). The surfaces and their
difference are evaluated on the write-up's 40 x 40 grid, from the model each device trained; a run whose
loss became NaN or infinite is marked as diverged and not drawn.
"""

NOTES = ("Surfaces, loss curves and final MSEs come from the last timed training of each surface point. "
         "A point whose timed work is estimated (from one warm epoch) to exceed max_point_seconds is skipped "
         "with its estimate; raise the limit to run it.")


def tables(rows):
    return {
        "Final MSE of the surface runs per device and variant": final_losses(rows),
        "Largest difference between the surfaces learned on the CPU and on each GPU (same run)":
            surface_differences(rows),
        "Crossover: the smallest swept sample count from which the GPU beats the CPU at every larger size":
            crossovers(rows),
    }


experiment_page("mlp_surface", charts, EXPLANATION, verdicts=verdicts, tables=tables, notes=NOTES)
