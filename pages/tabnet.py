from core.charts.tabnet import charts
from core.experiments.tabnet import final_losses, speedups, verdicts
from ui.template import experiment_page

EXPLANATION = """
TabNet's arithmetic per row is tiny: with `n_d = n_a = 17` and one decision step the network has 20,309
parameters, in linear layers at most 84 wide, a sparsemax and nine batch norms. What costs is the number
of separate operations per batch, and pytorch-tabnet adds several that a GPU cannot hide:

- **Ghost batch norm chunks.** Each of those batch norms (`GBN.forward` in `tab_network.py`) splits the
  batch into `batch_size / virtual_batch_size` chunks and normalises them one by one in a Python loop.
  With the default virtual batch of 128, a batch of 4096 runs 32 small batch norms per layer, forward
  and backward, instead of one. On a GPU each kernel launch costs a few microseconds whatever its size,
  so past the virtual batch size a larger batch no longer cuts the batch-norm launches per row: the GPU
  stays launch-bound.
- **Host round trips every batch.** `fit` reads every batch's loss back to the host
  (`loss.cpu().detach().numpy().item()` in `_train_batch`), and each forward pass copies freshly made CPU
  tensors to the device (the attention prior in `TabNetEncoder.forward`, the constant `sqrt(0.5)` in
  every `GLU_Block.forward`). A blocking copy from pageable memory waits for the device to finish all
  queued work, so the CPU can never queue more than a fraction of a batch ahead of the GPU.
- **The data loader.** The training set goes through a `DataLoader` over a per-row `Dataset`
  (`TorchDataset.__getitem__` returns one row; the default collate stacks them). That is Python work per
  row on the CPU, the same on both devices, and it does not shrink with a bigger batch; the loader bar in
  the "where the time goes" chart shows its share.

So on a GPU, at these sizes, much of an epoch is per-batch and per-chunk overhead paid on the host, and
the GPU's advantage can only come from the part that is real arithmetic: a larger batch helps the
GPU (fewer batches, fewer round trips), which is the write-up's first claim, but the gain stays far below
what a GPU gives a large dense model, which is the second.

**As written vs tuned.** The tuned variant follows the library's own advice: its README recommends large
batches and a virtual batch size that divides the batch size; issue #243 (dreamquark-ai/tabnet) reports
the ghost batch norm loop growing with `batch_size / virtual_batch_size`; in the GBM-perf benchmark
thread (szilard/GBM-perf #52) the maintainer suggests `num_workers` and batches of 4096 to 16384; issue
#258 discusses the per-row loader (its maintainers saw no speed-up from a batched one). So tuned uses a
virtual batch of up to 1024 rows (one chunk at 1024 and below, four at 4096), skips the
feature-importance pass (`compute_importance=False`), and on a GPU loads with worker processes into
pinned memory; on the CPU it keeps `num_workers=0`, as workers would take cores from the training. The
importance pass is a full `explain` over the training set after the last epoch, and `explain` stacks
each batch's masks onto all the previous ones (`np.vstack` inside its loop), so its cost grows faster
than the number of batches: at small batch sizes it can rival the training.
A larger virtual batch changes the normalisation statistics slightly, so both variants' training losses
are shown: they should land close together, and a CPU and a GPU fit of one configuration should agree.

**How we time it.** Our `EpochTimer` is a `pytorch_tabnet.callbacks.Callback` passed to `fit`. It reads a
clock, after synchronising the device, at `on_epoch_begin`, `on_batch_begin`, `on_batch_end` and
`on_epoch_end`: loader wait (until a batch arrives) plus training steps make the time per epoch; the rest
of the epoch (the 2,000-row evaluation set, the early-stopping callback copying the best weights, the
loader shutting its workers down) is evaluation. Between `on_train_end` and the return of `fit` is the
importance pass; before `on_train_begin`, the setup (copying the data, building loaders, network and
optimiser). An untimed one-epoch fit on a slice first takes the one-time costs. The quick preset trains
3 epochs on 12,288 rows, so its seconds for 10 epochs are scaled to 1,000,000 rows by the number of
batches (the tooltip shows the measured figures); the paper preset measures the write-up's scale.
"""

NOTES = """
Library notes: pytorch-tabnet 4.1.0 predates torch 2.13 and numpy 2; what it does with them is handled in
our code, never by patching the library.

- Importing `pytorch_tabnet.tab_model` raises a SciPy DeprecationWarning (`scipy.sparse.base`): silenced
  for that import only.
- `fit` warns "Best weights from best epoch are automatically used!" whenever an evaluation set is
  given, and its early-stopping callback prints a summary whatever `verbose` says: both are captured,
  the warnings kept in each point's `library_warnings`. `verbose=0` turns off the per-epoch log line
  and the "Device used" warning.
- The first optimiser built in a process imports `torch._dynamo` (seconds): the warm-up fit absorbs it.
- `device_name` gets our explicit `cpu` or `cuda:N`, which the library hands to `torch.device`; a plain
  `cuda` would silently train on the CPU where CUDA is missing, and the README's `gpu` is not a valid
  name at all. We check the model's device after construction.
- The README says `drop_last` defaults to False; the code defaults to True. Both variants pass True.
- `save_model`/`load_model` (not used here) call `torch.load` without `weights_only`, which torch 2.6
  and later default to True; the library's state dicts hold only tensors, so they still load.
- MPS is not offered: the library documents only the CPU and CUDA.
"""


def tables(rows):
    return {"GPU speedup per batch size (CPU seconds / GPU seconds per epoch, one run holding both)": speedups(rows),
            "Training loss after the last epoch, per variant and device": final_losses(rows)}


experiment_page("tabnet", charts, EXPLANATION, verdicts=verdicts, tables=tables, notes=NOTES)
