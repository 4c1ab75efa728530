"""The write-ups' own figures (core/published.json): each with an id, its value and unit, the device
and hardware as stated, and its source. Never measured by Crossover, and never typed again elsewhere."""
import json
from functools import lru_cache
from pathlib import Path

import pandas as pd

PUBLISHED_FILE = Path(__file__).with_name("published.json")


@lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    return tuple(json.loads(PUBLISHED_FILE.read_text(encoding="utf-8"))["figures"])


def load(experiment: str = None) -> pd.DataFrame:
    """One row per figure: id, experiment, figure, quantity, unit, value, device, hardware (as stated),
    the swept params as columns, source, source_title, note."""
    rows = [{**{k: v for k, v in e.items() if k != "params"}, **e.get("params", {})}
            for e in _entries() if experiment in (None, e["experiment"])]
    return pd.DataFrame(rows)


def entry(figure_id: str) -> dict:
    for e in _entries():
        if e["id"] == figure_id:
            return e
    raise KeyError(f"no published figure with id '{figure_id}' in {PUBLISHED_FILE.name}")


def figure_text(figure_id: str) -> str:
    """A figure as prose shows it: its value and unit, or a ratio with an x."""
    e = entry(figure_id)
    return f"{e['value']:g}x" if e["unit"] == "x" else f"{e['value']:g} {e['unit']}"
