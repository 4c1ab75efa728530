"""The rules a calibration checks its own figures by (core.calibration.calibrate calls them once its passes are
over), and what the profile keeps of them:

- specification: a figure above what its hardware can do at all (the machine's CPU or GPU matched to a catalogue
  entry, core.model.hardware; its maker's peak, the entry's `peak` in core/model/hardware.json) is measured again once; if it stays above, it is flagged, and the
  cost model reads the catalogue's figure for that hardware in its place (core.model.profiles.sections);
- siblings: one key of a family of alike figures (FAMILIES: every module call costs a few microseconds of Python)
  above SIBLING_RATIO times the family's median is measured again once; if it stays above, it is flagged, and the
  cost model reads the profile as if that key were never measured;
- range: one key of a keyed figure (a layer's module call, a size's rate) above its field's sane range (a stall of a
  busy machine, which core.calibration.calibrate's probes already measured again) is measured again once; if it stays
  above, it is flagged and left out of the section, so that the profile still validates and the cost model reads it
  as if that key were never measured (a figure without keys out of range is left for the profile's validation to
  refuse);
- floors: a figure held at a floor or a ceiling (a difference clipped at 0, at least a bare op's time) is logged as
  it is held (`held`), and the profile lists, under "floors", each figure whose stored value is such a bound
  (`floors`): a bound, not a measurement.

A flag: {"device", "figure", "key" (a keyed or sized figure's), "value" (as measured), "again" (measured again),
"limit", "rule", "why", "instead" (the specification rule's: the catalogue's figure the cost model reads)}. A floor:
{"device", "figure", "key", "floor" or "ceiling", "raw" (the value before it was held), "why"}."""
import math
import statistics
from typing import Callable

from core import devices
from core.model import hardware, profiles

SIBLING_RATIO = 10.0  # a family's key above this many times the family's median: a stall, not the machine
FAMILIES = ("module_call_seconds",)  # keyed figures whose keys cost alike (a layer's Python beyond its operations)
FLOPS_PER_CALL = {"matmul_flops": lambda n: 2.0 * int(n) ** 3}  # a sized figure's key as the catalogue sizes it

Retake = Callable[[str, str | None], float]  # (figure, key) -> the figure measured again


def catalogue_entry(fingerprint: dict, device: str) -> hardware.Device | None:
    """The catalogue's entry for a calibrated device (by the name its fingerprint gives), None where none matches."""
    if devices.kind(device) == "cpu":
        name = fingerprint.get("cpu_model")
    else:
        name = next((g.get("name") for g in fingerprint.get("gpus", []) if g.get("device") == device), None)
    book = hardware.catalogue()
    key = book.names.get(hardware._spelling(name)) if name else None
    return book.devices[key] if key else None


def _entries(value) -> list[tuple[str | None, float]]:
    return list(value.items()) if isinstance(value, dict) else [(None, value)]


def above_specification(section: dict, entry: hardware.Device | None) -> list[dict]:
    """The figures of a device's section above its catalogue entry's peak (the maker's, core/model/hardware.json)."""
    limits = entry.peak if entry else {}
    return [_suspect(figure, key, value, limit, "specification", f"above the {entry.title}'s specification")
            for figure, limit in limits.items() for key, value in _entries(section.get(figure, {}))
            if value > limit]


def out_of_line(section: dict) -> list[dict]:
    """The keys of each family (FAMILIES) above SIBLING_RATIO times the family's median."""
    found = []
    for figure in FAMILIES:
        family = section.get(figure, {})
        if len(family) < 3:
            continue
        limit = SIBLING_RATIO * statistics.median(family.values())
        found += [_suspect(figure, key, value, limit, "siblings", f"above {SIBLING_RATIO:g} times the median of the "
                           f"{len(family)} in its family") for key, value in family.items() if value > limit]
    return found


def above_range(section: dict) -> list[dict]:
    """The keys of each keyed figure above the top of its field's sane range (core.model.profiles.FIELD)."""
    return [_suspect(figure, key, value, profiles.FIELD[figure].high, "range", "above its figure's sane range")
            for figure, keyed in section.items() if isinstance(keyed, dict)
            for key, value in keyed.items() if value > profiles.FIELD[figure].high]


def _suspect(figure: str, key: str | None, value: float, limit: float, rule: str, why: str) -> dict:
    return {"figure": figure, **({} if key is None else {"key": key}), "value": value, "limit": limit, "rule": rule,
            "why": why}


def check(section: dict, entry: hardware.Device | None, retake: Retake) -> list[dict]:
    """Each figure of a device's section that breaks a rule measured again once (`retake`): where the new value
    keeps to the limit it replaces the old in `section`, else the figure is flagged (the flags are returned) and,
    above its sane range, left out of `section`."""
    flags, seen = [], set()
    for suspect in above_range(section) + above_specification(section, entry) + out_of_line(section):
        if (suspect["figure"], suspect.get("key")) in seen:  # one key breaking two rules is measured again once
            continue
        seen.add((suspect["figure"], suspect.get("key")))
        figure, key = suspect["figure"], suspect.get("key")
        again = retake(figure, key)
        if again <= suspect["limit"]:
            if key is None:
                section[figure] = again
            else:
                section[figure][key] = again
            continue
        flags.append(suspect | {"again": again} | (
            {"instead": _catalogue_value(entry, figure, key)} if suspect["rule"] == "specification" else {}))
        if suspect["rule"] == "range":
            section[figure].pop(key, None)
    return flags


def _catalogue_value(entry: hardware.Device, figure: str, key: str | None) -> float:
    return entry.value(figure, None if key is None else FLOPS_PER_CALL[figure](key))


def held(log: dict, device: str, figure: str, raw: float, floor: float = -math.inf, ceiling: float = math.inf,
         key: str = None, why: str = "") -> float:
    """`raw` held between `floor` and `ceiling`; logged (log[(device, figure, key)]) when that changed it."""
    value = min(max(raw, floor), ceiling)
    if value != raw:
        bound = {"floor": floor} if raw < floor else {"ceiling": ceiling}
        log.setdefault((device, figure, key), []).append(bound | {"raw": raw, "why": why})
    return value


def floors(measured: dict, log: dict) -> list[dict]:
    """The logged bounds (`held`) that a stored figure is: its value (a median over passes, or a value measured
    again) is the bound one of its measurements was held at."""
    found = []
    for (device, figure, key), bounds in log.items():
        value = measured.get(device, {}).get(figure)
        if key is not None and isinstance(value, dict):
            value = value.get(key)
        bound = next((b for b in bounds if value is not None and value == b.get("floor", b.get("ceiling"))), None)
        if bound:
            found.append({"device": device, "figure": figure, **({} if key is None else {"key": key}), **bound})
    return found
