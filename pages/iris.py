from core.charts.iris import charts
from core.experiments.iris import hook_checks, read_costs, same_model, verdicts
from ui.template import experiment_page

EXPLANATION = """
**Why the CPU wins here.** One epoch of this model is a 150 x 4 by 4 x 10 product, a ReLU, a 10 x 3
product, a softmax over 150 rows and the same again backwards: a few thousand floating-point
operations. The arithmetic takes nanoseconds on either device. What an epoch really costs is fixed:
Python running the loop, PyTorch dispatching one or two dozen operators, the autograd graph, and on a GPU
one kernel launch per operator (a few microseconds each, whatever the size). The CPU pays the first
three too, but it runs each operator at once and never launches anything, so its fixed price per step
is lower. The per-epoch chart shows that price on your devices; a bigger batch or model would cost the
GPU almost nothing more per step, which is where it starts to win.

**Why `.item()` costs a synchronisation but little time.** CUDA work is queued: the Python thread
launches kernels and moves on while the GPU works through the queue. `loss.item()` has to wait until
the queue has computed the loss, then copy four bytes back, so it stops the Python thread until the
GPU catches up. That would be expensive if the GPU were far behind. Here it never is: each kernel
takes a few microseconds, shorter than the time Python needs to launch the next one, so the queue is
almost always empty and the wait is just the last kernel plus one small copy, some ten or twenty
microseconds. Reading the loss every epoch therefore adds a modest, steady fraction to a step that is
dominated by launch overhead, and reading it every 100, 200 or 2000 epochs saves little more, which
is the write-up's table. On the CPU there is no queue at all: `.item()` is a plain memory read.

**What the tuned variant changes.** It writes each epoch's loss into a preallocated device tensor (one
more tiny kernel, no wait) and copies the whole curve back once at the end: the same information as
reading every epoch, with one synchronisation instead of thousands, and the same weights from the same
start (the table below compares final losses). On CUDA it goes further: the whole step (forward,
backward, SGD update and the loss write) is captured once as a CUDA graph and replayed, so each epoch
is one launch instead of dozens and Python no longer sets the pace.

**`model(x)` and `model.forward(x)`.** `nn.Module.__call__` runs the registered hooks around
`forward`; calling `forward` directly skips them (and anything built on hooks). The hook check counts
how often a forward hook ran over ten calls each way and times both calls: the difference is the cost
of `__call__`'s bookkeeping, a few microseconds, which is why `model(x)` is the right call.

Setup: all 150 Iris samples (bundled with scikit-learn), features min-max scaled to [0, 1] (the
write-up does not say how it scaled them), one full batch per epoch, weights seeded on the CPU and
copied to each device. Short runs are scaled to 20,000 epochs from their per-epoch cost, which is
constant after the first steps.
"""

NOTES = ("Host synchronisations are counted at the calls that read a loss back (each `.item()` or `.cpu()` "
         "of a device tensor); the final loss and accuracy are evaluated after the timed runs. On a busy CPU, "
         "PyTorch's intra-op threads can make tiny operators far slower: the thread count is in every record.")


def tables(rows):
    return {
        "The cost of reading the loss (per run and device)": read_costs(rows),
        "Same model from the same start: final training loss": same_model(rows),
        "Hook check: how often the forward hook ran over ten calls": hook_checks(rows),
    }


experiment_page("iris", charts, EXPLANATION, verdicts=verdicts, tables=tables, notes=NOTES)
