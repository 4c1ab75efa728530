"""The iris experiment: its declaration and workloads (experiment), what its results mean (analysis, charts,
about.md) and how the cost model replicates its write-up's figures (writeup)."""
from core.experiments.iris import analysis, charts, writeup
from core.experiments.iris.experiment import EXPERIMENT

EXPERIMENT.bind(analysis, charts, writeup)

__all__ = ["EXPERIMENT"]
