"""Charts for the matrix-multiply experiment."""
import altair as alt
import pandas as pd

from core.charts.common import grouped_bars, measured_lines, ok_rows
from core.experiments.matmul import TRANSFERS, speedups_at


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.Chart]:
    ok = ok_rows(rows)
    products = ok[~ok["variant"].isin(TRANSFERS)]
    transfers = ok[ok["variant"].isin(TRANSFERS)]
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
    """numpy time / variant time at 200x200: ours per variant and machine, the write-up's claims beside."""
    ours = speedups_at(rows, 200)
    ours = ours.assign(series="measured · " + ours["machine"].str[:40], label=ours["variant"])
    theirs = published.assign(series="published · " + published["hardware"], label=published["variant"],
                              speedup_over_numpy=published["value"])
    data = pd.concat([ours, theirs], ignore_index=True)[["label", "series", "speedup_over_numpy"]]
    return grouped_bars(data, "label", "speedup_over_numpy", "series",
                        title="Speed relative to numpy at 200x200 (above 1: faster than numpy)",
                        y_title="numpy time / variant time", log_y=True)
