"""Charts for the matrix-multiply experiment."""
import altair as alt
import pandas as pd

from core.present import charts as grammar
from core.present.analysis import ok
from core.experiments.matmul.analysis import CLAIM_SIZE
from core.experiments.matmul.experiment import BASELINE, TRANSFERS

SIZE_TITLE = "matrix size n (n x n, float32)"


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.TopLevelMixin]:
    measured = ok(rows)
    products = measured[~measured["variant"].isin(TRANSFERS)]
    transfers = measured[measured["variant"].isin(TRANSFERS)]
    out = [
        grammar.measured_lines(products.assign(ms=products["median_s"] * 1e3), "size", "ms",
                               title="Time per product", x_title=SIZE_TITLE,
                               y_title="milliseconds per product (median)"),
        grammar.measured_lines(products, "size", "gflop_per_s", title="Achieved GFLOP/s", x_title=SIZE_TITLE,
                               y_title="GFLOP/s of one product (from its median time)", spread="rate"),
        speedup_vs_published(rows, published),
    ]
    if len(transfers):
        out.append(grammar.measured_lines(transfers, "size", "gb_per_s", title="Host-device bandwidth",
                                          x_title="matrix size n (one n x n float32 matrix copied)",
                                          y_title="GB/s of one copy (from its median time)", spread="rate"))
    return out


def speedup_vs_published(rows: pd.DataFrame, published: pd.DataFrame) -> alt.LayerChart:
    """numpy time / variant time at the claim's size, one row per variant: ours per run (numpy itself at 1),
    the write-up's figures beside them."""
    at_claim = ok(rows)
    at_claim = at_claim[(at_claim["size"] == CLAIM_SIZE) & ~at_claim["variant"].isin(TRANSFERS)]
    ours = grammar.paired_ratio(at_claim[at_claim["variant"] == BASELINE], at_claim, ["point"])
    itself = ours["variant"] == BASELINE  # numpy over itself is 1 by definition: no spread to show
    ours = ours.assign(series="measured", lo=ours["lo"].mask(itself), hi=ours["hi"].mask(itself))
    theirs = grammar.published(published).rename(columns={"value": "ratio"})
    theirs = theirs.assign(series="published · " + theirs["hardware"])
    data = pd.concat([ours, theirs], ignore_index=True).assign(label=lambda d: d["variant"])
    return grammar.ratio_dots(data, title=f"Speed relative to numpy at {CLAIM_SIZE}x{CLAIM_SIZE} (right of 1: "
                                          "faster than numpy)",
                              x_title=f"numpy time / variant time per {CLAIM_SIZE}x{CLAIM_SIZE} product (medians)")
