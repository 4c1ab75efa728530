from core.experiments.iris.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
