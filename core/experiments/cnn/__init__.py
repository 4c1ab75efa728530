from core.experiments.cnn.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
