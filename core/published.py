"""The write-ups' own figures (core/published.json): each with an id, its value and unit, the device
and hardware as stated, and its source; and the write-ups themselves (title, author, year, address), which
the pages cite. Never measured by Crossover, and never typed again elsewhere."""
import json
from functools import lru_cache
from pathlib import Path

import pandas as pd

PUBLISHED_FILE = Path(__file__).with_name("published.json")
NOT_STATED = "not stated"
SOURCE_FIELDS = ("title", "title_en", "author", "year", "url", "where")


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



@lru_cache(maxsize=1)
def _sources() -> dict:
    return json.loads(PUBLISHED_FILE.read_text(encoding="utf-8")).get("sources", {})


def source(source_id: str) -> dict:
    """A write-up as core/published.json's `sources` describe it (title, title_en, author, year, url, where),
    each field "not stated" where the write-up does not say, or where the id is not there."""
    found = _sources().get(source_id, {})
    return {field: found.get(field) or NOT_STATED for field in SOURCE_FIELDS}


def citation(source_id: str, where: bool = True) -> str:
    """The write-up in one line of markdown: '*title* ("English title"), author, year: where. <url>' (without
    `where`, the kind of text it is and where it was read, for a page's caption)."""
    s = source(source_id)
    if s["title"] == NOT_STATED:
        return "not stated."
    english = f' ("{s["title_en"]}")' if s["title_en"] != NOT_STATED else ""
    author = f"by {s['author']}" if s["author"] != NOT_STATED else "author not stated"
    year = s["year"] if s["year"] != NOT_STATED else "year not stated"
    kind = f": {s['where']}" if where and s["where"] != NOT_STATED else ""
    address = f" <{s['url']}>" if s["url"] != NOT_STATED else " Address not stated."
    return f"*{s['title']}*{english}, {author}, {year}{kind}.{address}"
