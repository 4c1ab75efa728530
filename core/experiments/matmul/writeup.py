"""How the write-up's 200 x 200 speedups (seed 002: a K80 against numpy on a MacBook, about 6x with the
operands already on the GPU and about 1x copying them in and the result out every time) are replicated by the
cost model (core.predict.writeups): one product on each side."""
from core.predict.writeups import Speedup

SIZE = 200
CPU_SIDE = "torch cpu"  # numpy's product is invisible to the census (NUMPY_UNTRACED)
NUMPY_UNSEEN = (f"one {SIZE} x {SIZE} product on each side. numpy's product runs outside PyTorch, where the census "
                f"cannot count it: the CPU side is torch.matmul on the CPU ('{CPU_SIDE}'), which calls a BLAS GEMM "
                "as numpy does")


def speedup(figure: str, gpu_variant: str) -> Speedup:
    return Speedup(figure, CPU_SIDE, gpu_variant, {"size": SIZE}, how=NUMPY_UNSEEN,
                   overrides={"sizes": (SIZE,), "variants": (CPU_SIDE, gpu_variant)})


REPLICAS = (
    speedup("matmul-200-speedup.gpu.size200.torch-resident", "torch resident"),
    speedup("matmul-200-speedup.gpu.size200.torch-copy-pageable", "torch copy pageable"),
)
