"""Charts for the matrix-multiply experiment."""
import altair as alt
import pandas as pd

from core.analysis import ok
from core.charts import grouped_bars, measured_lines
from core.experiments.matmul.analysis import CLAIM_SIZE, gains
from core.experiments.matmul.experiment import TRANSFERS


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.Chart]:
    measured = ok(rows)
    products = measured[~measured["variant"].isin(TRANSFERS)]
    transfers = measured[measured["variant"].isin(TRANSFERS)]
    out = [
        measured_lines(products.assign(ms=products["median_s"] * 1e3), "size", "ms",
                       title="Time per product", x_title="matrix size n (n x n, float32)",
                       y_title="milliseconds per product (median)"),
        measured_lines(products, "size", "gflop_per_s", title="Achieved GFLOP/s",
                       x_title="matrix size n", y_title="GFLOP/s", log_y=True),
        speedup_vs_published(rows, published),
    ]
    if len(transfers):
        out.append(measured_lines(transfers, "size", "gb_per_s", title="Host-device bandwidth",
                                  x_title="matrix size n (one matrix copied)", y_title="GB/s", log_y=False))
    return out


def speedup_vs_published(rows: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """numpy time / variant time at the claim's size: ours per variant and machine, the write-up's beside."""
    ours = gains(rows)
    ours = ours[ours["size"] == CLAIM_SIZE] if len(ours) else ours
    ours = ours.assign(series="measured · " + ours["machine"].str[:40], label=ours["variant"],
                       speedup_over_numpy=ours["gain"])
    theirs = published.assign(series="published · " + published["hardware"], label=published["variant"],
                              speedup_over_numpy=published["value"])
    data = pd.concat([ours, theirs], ignore_index=True)[["label", "series", "speedup_over_numpy"]]
    return grouped_bars(data, "label", "speedup_over_numpy", "series",
                        title=f"Speed relative to numpy at {CLAIM_SIZE}x{CLAIM_SIZE} (above 1: faster than numpy)",
                        y_title="numpy time / variant time", log_y=True)
