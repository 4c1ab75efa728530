from core.experiments.jacobian.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
