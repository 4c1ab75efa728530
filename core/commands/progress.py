"""What a command prints while it works: a line per finished point (its median, spread and what its census
and breakdown found) and, on a terminal, a progress bar below them that keeps moving during a long point."""
import sys
import threading
from contextlib import contextmanager

from tqdm import tqdm

from core.measure import breakdown, census
from core.present import stats
from core.present.tables import seconds_text
from core.store import results

TICK_S = 1.0  # the bar is redrawn this often, so that its elapsed time moves during a long point


class Progress:
    """What `run` prints: a line per finished point and per stand-in census, and on a terminal a tqdm bar
    below them (points done, elapsed, estimated time left, the point being measured). Where stdout is not
    a terminal (an app's run writes to its log) the bar is off and the lines alone are printed."""

    def __init__(self, bar: tqdm):
        self.bar = bar

    def starting(self, i: int, total: int, point) -> None:
        self.bar.set_postfix_str(f"now: {point.describe()}", refresh=True)

    def finished(self, done: int, total: int, point, row: dict) -> None:
        self._line(f"[{done}/{total}] {point.describe()}: {point_outcome(row)}{inspection_text(row)}")
        self.bar.update()

    def standin(self, done: int, total: int, point, entry: dict) -> None:
        if done == 1:
            self.bar.reset(total)
            self.bar.set_description_str("GPU stand-in censuses")
        found = entry["census"]
        what = (census.describe(found, entry["unit"], entry["per_call"]) if "operations" in found
                else f"no census: {found.get('skipped') or found.get('error')}")
        self.bar.set_postfix_str(f"now: {point.variant} {results.point_text(point.params)}".rstrip())
        self._line(f"[GPU stand-in {done}/{total}] {point.variant} {results.point_text(point.params)}: {what}")
        self.bar.update()

    def _line(self, text: str) -> None:
        self.bar.write(text, file=sys.stdout)  # above the bar, which is drawn again below it
        sys.stdout.flush()


def on_terminal() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


@contextmanager
def progress_bar(what: str, total: int):
    """A Progress whose bar (on stderr) is redrawn every TICK_S by a thread of its own: tqdm draws only
    when told, so without it the elapsed time would stand still for the whole of a long point."""
    with tqdm(desc=what, total=total, unit="point", file=sys.stderr, disable=not on_terminal(), smoothing=0,
              bar_format="{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed} elapsed, about {remaining} left{postfix}"
              ) as bar:
        stop = threading.Event()
        ticker = threading.Thread(target=_tick, args=(bar, stop), name="progress bar", daemon=True)
        if not bar.disable:
            ticker.start()
        try:
            yield Progress(bar)
        finally:
            stop.set()
            if ticker.is_alive():
                ticker.join()


def _tick(bar: tqdm, stop: threading.Event) -> None:
    while not stop.wait(TICK_S):
        bar.refresh()


def point_outcome(row: dict) -> str:
    """'median 132 ms per epoch (one sample: 2,000 epochs in 264 s; IQR 3%, n=5)', or the failure."""
    if row["status"] != "ok":
        return f"{row['status']}: {row.get('error')}"
    if row.get("median") is None:
        return "done"
    per_call = row["per_call"] or 1
    sample = (f"one sample: {results.call_text(row['unit'], per_call)} in {seconds_text(row['median'])}; "
              if per_call > 1 else "")
    spread = f"IQR {row['iqr'] / row['median']:.0%}" if row["iqr"] is not None and row["median"] > 0 else "one sample"
    return (f"median {seconds_text(results.per_unit(row['median'], per_call))} per {row['unit']} "
            f"({median_range(row)}{sample}{spread}, n={row['n']}{', noisy' if row['noisy'] else ''})")


def median_range(row: dict) -> str:
    """'95% CI 128–140 ms; ' per unit, from the row's samples (nothing with fewer than two)."""
    if len(row.get("samples") or ()) < 2:
        return ""
    found = stats.median_interval(row["samples"])
    per_call = row["per_call"] or 1
    return f"95% CI {seconds_text(found.low / per_call)}–{seconds_text(found.high / per_call)}; "


def inspection_text(row: dict) -> str:
    """'; 38 operations, ... per epoch; mostly host overhead (81%)' from the row's census and breakdown."""
    found, parts = row.get("census") or {}, row.get("breakdown") or {}
    text = f"; {census.describe(found, row['unit'], row['per_call'])}" if "operations" in found else ""
    if parts.get("adds_up"):
        part = max(breakdown.PARTS, key=lambda p: parts[f"{p}_s"])
        text += f"; mostly {breakdown.LABELS[part]} ({parts[f'{part}_s'] / row['median']:.0%})"
    elif parts.get("adds_up") is False:  # the run's own timing stands; only its split is missing
        text += "; no split of its time: the profiler's overhead outgrew these tiny operations"
    return text
