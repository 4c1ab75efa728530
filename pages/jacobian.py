from core.charts.jacobian import charts
from core.experiments.jacobian import correctness, skipped, speedups, verdicts
from ui.template import experiment_page

EXPLANATION = """
**Why the written call is quadratic.** The network maps `t` (val x 1) to val x 400 outputs, and
`torch.autograd.functional.jacobian` without `vectorize` loops over every one of the 400 val output
elements and runs a backward pass through the whole batch for each. That is 400 val passes of O(val)
work each: O(val²), 40,000 passes at val=100 and 400,000 at val=1000. Each pass costs a chain of small
operations, so at small val the fixed cost per pass dominates (the `a·400val` term of the fitted time
model) and at large val the batch-sized work does (`b·400val²`).

**Why it is mostly zeros.** Sample i's outputs depend only on its own input t_i, so each backward pass
returns a val-long gradient with one non-zero entry. The full val x 400 x val x 1 Jacobian (1.6 GB of
float32 at val=1000) has a fraction 1/val of non-zeros (the *nonzero fraction* column below) and
holds exactly the val x 400 x 1 diagonal blocks: the per-sample Jacobian, the same information.

**The methods that replace it.** `vectorize=True` batches all the backward passes into one vmapped call,
but its cotangents are a (400 val) x (400 val) identity: 160,000 val² floats, 640 GB at val=1000,
which the estimator refuses before anything is allocated. Per sample, reverse mode (`vmap(jacrev)`) still
needs one pass per *output* (400) and materialises a 400 x 400 basis for every sample; forward mode
needs one pass per *input*, and each sample has one, so `vmap(jacfwd)` or a single `jvp` with a ones
tangent (**tuned**) gives every derivative in about the cost of a few forward passes, linear in val.

**CPU against GPU.** For the written call each of the 400 val passes is a handful of tiny kernels. At
val=100 a pass is nearly all fixed cost (launches, Python, autograd bookkeeping), which is higher on a
GPU than on a CPU, so the GPU loses; at val=1000 the batch-sized part grows on the CPU but stays close
to the launch cost on the GPU, so the GPU wins. The claims above are checked from the records, with
the written call's time extrapolated from its fitted model where it was not measured.

**Memory of the written call on Linux.** On a CPU with glibc the process's resident memory grows by about
0.8 x (400 val)² x 4 bytes during the call (5.4 GB at val=100 measured here): the heap keeps roughly one
output-sized block per backward pass. The estimator counts it, so on such machines the written call is
skipped well below val=1000 and its time there is extrapolated; the CUDA caching allocator reuses
those blocks. Starting a run with `MALLOC_MMAP_THRESHOLD_=65536` in the environment makes glibc map such
blocks and give them back when freed (the estimator then leaves the term out); it also made the call
faster here, since growing the heap costs page faults.

**How points are skipped.** Before each point the estimator computes its memory from the method's
complexity (formulas checked against peak resident memory) and its time from the method's time model
(`a·400val + b·400val²` for the written call, `a + b·val²` for the vectorized one, `a + b·val` per
sample) with non-negative coefficients fitted to the two largest vals of that method timed on that
device in the same run: first two small calibration vals, then the points as they are measured in
rising val. The time model is never a hard-coded constant of this machine. A point over
`memory_fraction` of the device's free memory or over `budget_s` is recorded as skipped with both
estimates, never attempted.
"""


def tables(rows):
    return {
        "Correctness: each method's per-sample Jacobian against the written call's diagonal blocks on the same "
        "device (max absolute difference)": correctness(rows),
        "Speedup of the fastest per-sample method over the written call (measured or extrapolated)": speedups(rows),
        "Skipped points and the estimates that decided it": skipped(rows),
    }


experiment_page("jacobian", charts, EXPLANATION, verdicts=verdicts, tables=tables)
