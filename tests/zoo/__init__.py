"""Models of our own for checking the cost model on architectures it was never fitted on (models.ZOO)."""
