"""How hard a calibration looks: an `Effort` (passes, repeats, the sizes of each sized probe), the full one and
`--quick`'s."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Effort:
    """How hard to look: the passes over every probe, each timing's repeats and block length (micro), the sizes
    of the sized fields
    (the elementwise ones SMALL_ELEMENTWISE below the large tensors),
    the samples per DataLoader pass (batch 1, batched), the batch sizes of the DataLoader per batch size and the
    rows it passes over at most, the bytes of the large tensors per device kind,
    the nodes of the replayed graph and the kernels queued back to back, the GEMM grid's M, K and N, the
    flash-attention grid's block rows (32, 64 or 256: the kernel's own), key columns and head sizes, and the fused
    LSTM layer's (batch, width) shapes."""
    passes: int
    repeats: int
    block_seconds: float
    matmul_sizes: dict[str, tuple[int, ...]]  # by device kind: a GPU reaches its rate at far larger products
    conv1d_lengths: tuple[int, ...]
    conv2d_sides: tuple[int, ...]
    loader_samples: tuple[int, int]
    loader_batches: tuple[int, ...]
    loader_rows: int
    large_bytes: dict[str, int]
    graph_nodes: int
    queued_kernels: int
    gemm_grid: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    attention_grid: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    lstm_shapes: tuple[tuple[int, int], ...]


FULL = Effort(passes=3, repeats=3, block_seconds=0.01,
              matmul_sizes={"cpu": (16, 32, 64, 256, 1024), "cuda": (16, 32, 64, 256, 1024, 4096)},
              conv1d_lengths=(16, 256, 2048),
              conv2d_sides=(4, 16, 64), loader_samples=(128, 2048), loader_batches=(1, 16, 256, 4096),
              loader_rows=8192, large_bytes={"cpu": 2**26, "cuda": 2**28},
              graph_nodes=200, queued_kernels=500,
              gemm_grid=((16, 128, 1024, 8192), (2, 16, 64, 256), (1, 4, 16, 64, 256)),
              attention_grid=((32, 256), (32, 512), (8, 128)),
              lstm_shapes=((4, 32), (16, 64), (64, 128)))
QUICK = Effort(passes=1, repeats=3, block_seconds=0.003, matmul_sizes={"cpu": (16, 64, 256), "cuda": (16, 64, 256, 1024)},
               conv1d_lengths=(256,), conv2d_sides=(16,),
               loader_samples=(64, 1024), loader_batches=(1, 64, 1024), loader_rows=2048, large_bytes={"cpu": 2**22, "cuda": 2**24}, graph_nodes=20,
               queued_kernels=50, gemm_grid=((16, 1024), (4, 64), (2, 16)),
               attention_grid=((32, 64), (32, 128), (8, 32)), lstm_shapes=((16, 64), (64, 128)))
