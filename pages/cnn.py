from core.charts.cnn import charts
from core.experiments.cnn import crossovers, speedups, variant_gains, verdicts
from ui.template import experiment_page

EXPLANATION = """
**Why a model this small cannot keep a GPU busy.** The write-up's `BaseModel` does about 3,700
multiply-adds per row (the second convolution and the first linear layer most of them): a step on a
batch of 512 rows is some 4 MFLOP forward and three times that with the backward pass, which a GPU
finishes in microseconds. But every step also pays a fixed price that does not shrink with the
model: several dozen kernel launches for the forward pass, the backward pass and Adam (each a few
microseconds of CPU-side dispatch through Python and PyTorch), a host-to-device copy of the batch, and
a `loss.item()` that makes the CPU wait for the GPU to finish before it may queue the next step. The
GPU spends most of each step waiting for the CPU to tell it what to do, so its time per step is
almost flat in the batch size, and the CPU, which does the arithmetic itself without launches or
copies, stays close. At batch 16 the fixed cost is all there is (62,500 steps per epoch) and the
write-up's GPU was only 24% faster; larger batches spread it over more rows, which is why the
published times fall so steeply with the batch and the gain grows with it. The step-time chart shows
the same flat-then-rising shape on your machine.

**Small data.** At a fixed batch the work per step does not depend on the number of rows, so in
steady state the GPU's advantage should be the same at 1e3 rows as at 1e6. What differs is the
one-off cost: creating the CUDA context, loading the cuDNN and cuBLAS kernels, the first copies and
the first DataLoader iterator take a second or more, which dwarfs a few epochs over 1e3 rows but
vanishes in 1e6. The write-up's times most likely included it. We keep the first (warm-up) epoch out
of the timing and record it apart (`first_epoch_s` in the table), so the data-size chart shows where
the lines cross in steady state; caches still favour the CPU on small data (1e3 rows of 84 floats fit
in its cache, 1e6 rows take 336 MB).

**2-D and recurrent models.** The MNIST network does about 12 million multiply-adds per image (its
second convolution almost all of them), some 3,000 times the 1-D model's work per row, so the GPU's
arithmetic finally outweighs its fixed costs. A GRU is hard for a CPU in another way: 32 dependent
time steps per batch, each a small matrix product, while on the GPU cuDNN runs the whole recurrence in
fused kernels. The speedup comparison puts the three side by side.

**What the tuned variant changes.** A `DataLoader` over a `TensorDataset` fetches one row at a time
and stacks them, a few microseconds per row on the host (milliseconds per batch of 512, often more
than the model's own step on the CPU), then copies the batch to the device. The tuned loop keeps the
whole data set on the device, draws each epoch's permutation there and gathers each batch with one
indexing kernel. It adds the loss to a device-side sum read once after the epoch, so the CPU never
waits for the GPU inside an epoch and can queue steps ahead of it. Adam runs fused (one kernel for all
parameters rather than several per tensor). On CUDA the whole step (gather, forward, backward,
optimiser) is captured once as a CUDA graph and replayed, one launch instead of dozens. Both variants
start from the same weights (seeded on the CPU, then moved), train on the same data for the same
number of epochs and record their final training and validation losses, so you can check that they
learned the same thing: on the write-up's random labels a loss near 1.0 (the labels' variance) is all
there is to learn.

**How it is timed.** Each sample is one whole training epoch (validation excluded) after one warm-up
epoch, with the device synchronised before every clock read; the time for 10 epochs is 10 x the
median epoch, and the time per step is the median epoch over its number of steps. Every epoch is made
of full batches, so row counts must be multiples of the batch sizes: 1,000,000 is not a multiple of
512, so the `paper` preset trains on 2^20 = 1,048,576 rows, and the comparison with the write-up's
table multiplies our time per step by the author's number of steps (1,000,000 / batch, rounded up)
and by 10 epochs. The author's optimiser is not stated; we use Adam (learning rate 0.001).
"""

NOTES = ("GRU contrast (our choice; the author's GRU is not described): one GRU layer, 16 features, 64 hidden "
         "units, 32-step sequences, Linear(64, 1) on the last state, MSE; the target is the scaled sum of the "
         "first feature. MNIST contrast: synthetic 28x28 images (a faint random template per class under unit "
         "noise), since nothing is downloaded. The published MNIST times (October 2018) most likely came from the example of that "
         "day, a smaller network (Conv2d(1,10,5), Conv2d(10,20,5), Linear(320,50), Linear(50,10)) than today's "
         "example that we time: compare its speedup, not its seconds.")


def tables(rows):
    return {"Data-size crossover: the smallest training set from which the GPU beats the CPU at every larger size": crossovers(rows),
            "GPU speedup over the CPU for every point measured on both": speedups(rows),
            "Tuned vs as written: milliseconds per training step": variant_gains(rows)}


experiment_page("cnn", charts, EXPLANATION, verdicts=verdicts, tables=tables, notes=NOTES)
