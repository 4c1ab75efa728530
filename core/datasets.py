"""Generated data shared by experiments (never downloaded)."""
from functools import lru_cache

import torch

FEATURES = 84
VALIDATION_ROWS = 2000


@lru_cache(maxsize=2)
def random_regression(rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 1-D CNN write-up's data (also TabNet's): train = randn(rows, 84), labels randn(rows, 1),
    validation randn(2000, 84) and its labels, float32 on the CPU, from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, FEATURES, generator=g), torch.randn(rows, 1, generator=g),
            torch.randn(VALIDATION_ROWS, FEATURES, generator=g), torch.randn(VALIDATION_ROWS, 1, generator=g))
