"""The matrix-multiply experiment's tables and claims, over the rows frame."""
import pandas as pd

from core.present import analysis, stats
from core.present.analysis import Claim, Finding
from core.experiments.matmul.experiment import BASELINE, GPU_PRODUCTS, TRANSFERS
from core import published
from core.published import figure_text
from core.present.tables import Table

RESIDENT, COPIED = "matmul-200-speedup.gpu.size200.torch-resident", "matmul-200-speedup.gpu.size200.torch-copy-pageable"
CLAIM_SIZE = published.entry(RESIDENT)["params"]["size"]


def gains(rows: pd.DataFrame) -> pd.DataFrame:
    """numpy time / product time for every product measured beside numpy on its machine (`gain`)."""
    compared = analysis.relative_to(rows, BASELINE, same_device=False)
    return compared[~compared["variant"].isin(TRANSFERS)] if len(compared) else compared


def crossover_sizes(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine and GPU product: the smallest size from which it beats numpy at every larger size."""
    products = gains(rows)
    products = products[products["variant"].isin(GPU_PRODUCTS)] if len(products) else products
    found = analysis.crossovers(products, "size", ["machine", "device", "variant"], value="gain")
    return found.rename(columns={"crossover": "crossover_size", "compared": "sizes_compared"})


def _gain_at_claim_size(variant: str):
    def check(rows: pd.DataFrame, published: pd.DataFrame) -> Finding:
        found = gains(rows)
        mine = analysis.require(found[(found["variant"] == variant) & (found["size"] == CLAIM_SIZE)], rows)
        measured, stated = stats.ratio(mine, "baseline_median_s", "median_s"), float(published["value"].iloc[0])
        return Finding(analysis.within_factor(measured.value, stated),
                       f"Measured {measured.text()} numpy's speed at {CLAIM_SIZE}x{CLAIM_SIZE} (median over "
                       f"{len(mine)} machine(s) and GPU(s)).",
                       interval=measured, thresholds=(stated / 2, stated * 2))
    return check


WITHIN_2X = "Reproduced means within a factor of 2 of the published figure."
CLAIMS = [
    Claim(f"A {CLAIM_SIZE}x{CLAIM_SIZE} product on the GPU with the operands resident runs at about "
          f"{figure_text(RESIDENT)} numpy's speed", _gain_at_claim_size("torch resident"), WITHIN_2X, (RESIDENT,)),
    Claim(f"With copies both ways every time, the GPU runs at about {figure_text(COPIED)} numpy's speed: as "
          "slow as numpy", _gain_at_claim_size("torch copy pageable"), WITHIN_2X, (COPIED,)),
]
def gain_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Every product's speed relative to numpy on its machine, with its 95% interval."""
    found = gains(rows)
    found = analysis.with_interval(found, "baseline_median_s", "median_s", "gain") if len(found) else found
    return found.reindex(columns=["machine", "device", "variant", "size", "baseline_median_s", "median_s", "gain",
                                  "gain_ci"])


TABLES = {"Crossover: the smallest size from which each GPU variant beats numpy at every larger size":
          Table(crossover_sizes, {"crossover_size": "GPU faster from (n)"}, missing={"crossover_size": "never"},
                needs_gpu=True),
          "Speed relative to numpy (numpy time / product time), with its 95% interval":
          Table(gain_table, {"baseline_median_s": "numpy (s per product)", "median_s": "This product (s)",
                             "gain": "numpy / this", "gain_ci": "95% CI"})}
