from core.charts.cnn import charts
from core.experiments.cnn import crossovers, speedups, variant_gains, verdicts
from ui.template import experiment_page

EXPLANATION = """
**Why a model this small cannot keep a GPU busy.** One training step of the write-up's `BaseModel` on a
batch of 512 rows is about 2 MFLOP of forward work (the first layer, 84 x 16 multiply-adds per row,
dominates) and perhaps three times that with the backward pass: a GPU does that in a few microseconds.
But every step also pays a fixed price that does not shrink with the model: roughly forty kernel
launches for the forward pass, the backward pass and Adam (each a few microseconds of CPU-side
dispatch through Python and the PyTorch dispatcher), a host-to-device copy of the batch, and a
`loss.item()` that makes the CPU wait for the GPU to finish before it may queue the next step. The
GPU spends most of each step idle, waiting for the CPU to tell it what to do next, so its time per
step is almost flat in the batch size, and the CPU, which does the arithmetic itself with no launches
and no copies, stays close. At batch 16 the fixed cost is all there is: 62,500 steps per epoch, and
the write-up's GPU is only 24% faster. Larger batches amortise it over more rows, which is why the
published times fall so steeply with the batch and why the gain grows with it.

**Small data.** With 1e3 to 1e5 rows an epoch is a handful of steps, and on the GPU each epoch also
pays the DataLoader's start-up and the first copies: the data-size chart shows where, on your
machine, the GPU's line drops below the CPU's (the crossover table lists it per batch size).

**2-D and recurrent models.** The MNIST network's second convolution alone does about 10 MFLOP per
image, some 2,000 times the 1-D model's work per row, so the GPU's arithmetic finally matters more
than its fixed costs. A GRU is worse for a CPU in another way: 32 dependent time steps, each a small
matrix product, per batch; on the GPU cuDNN runs the whole recurrence as fused kernels. The
speedup comparison puts the three side by side.

**What the tuned variant changes.** The `DataLoader` over a `TensorDataset` indexes one row at a time
and stacks them (tens of microseconds per batch of 512 on the host), then copies the batch to the
device; the tuned loop keeps the whole data set on the device, draws each epoch's permutation there
and gathers each batch with one indexing kernel. It adds the loss to a device-side sum and reads it
once after the epoch, so the CPU never waits for the GPU inside an epoch and can queue steps ahead of
it. Adam runs fused (one kernel for all parameters instead of several per tensor). On CUDA the whole
step (gather, forward, backward, optimiser) is captured once as a CUDA graph and replayed, which
replaces some forty launches by one. Both variants start from the same weights (seeded on the CPU,
then moved), train on the same data for the same number of epochs, and record their final
training and validation losses, so you can check that they learned the same thing: on random labels
a loss near 1.0 (the labels' variance) is all there is to learn.

**How it is timed.** Each sample is one whole training epoch (validation excluded) after one untimed
warm-up epoch, with the device synchronised before every clock read; the time for 10 epochs is 10 x
the median epoch, and the time per step is the median epoch over its number of steps. Every epoch is
made of full batches, so row counts must be multiples of the batch sizes: 1,000,000 is not a multiple
of 512, so the `paper` preset trains on 2^20 = 1,048,576 rows, and the comparison with the write-up's
table multiplies our time per step by the author's number of steps (1,000,000 / batch, rounded up)
and by 10 epochs. The author's optimiser is not stated; we use Adam (learning rate 0.001).
"""

NOTES = ("GRU contrast: one GRU layer, 16 features, 64 hidden units, 32-step sequences, Linear(64, 1) on the "
         "last state, MSE; the author's GRU is not described. MNIST contrast: synthetic 28x28 images (a random "
         "template per class plus noise), since the data set may not be downloaded.")


def tables(rows):
    return {"Data-size crossover: the smallest training set from which the GPU beats the CPU at every larger size": crossovers(rows),
            "GPU speedup over the CPU for every point measured on both": speedups(rows),
            "Tuned vs as written: milliseconds per training step": variant_gains(rows)}


experiment_page("cnn", charts, EXPLANATION, verdicts=verdicts, tables=tables, notes=NOTES)
