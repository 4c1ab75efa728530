from core.experiments.matmul.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
