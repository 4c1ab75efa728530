from core.experiments.mlp_surface.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
