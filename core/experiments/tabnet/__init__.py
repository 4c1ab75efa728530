from core.experiments.tabnet.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
