"""Measuring: `timing` (synchronised clocks, warm-up, repeats), `census` (every ATen operation of a unit, under
TorchDispatchMode), `breakdown` (torch.profiler's split of a sample), `graphs` (CUDA graphs), `gc_watch`, the
experiment contract (`experiment`: what an experiment declares and measures), the `runner` that measures a plan into
a record, and the stand-in (`standin`: a GPU's census taken on the meta device, with `kernels/` saying how torch runs
layers as kernels on each device). May import: the ground modules and core.store."""
