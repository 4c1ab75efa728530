"""Catalogue figures derived from Crossover's reference machines (core/hardware.json's "references": machines whose
calibrated profiles ship in the app's own results folder). No measurement exists of a catalogue CPU's Python costs,
its operations timed one by one or its DataLoader per batch size; the catalogue states each such figure as a rule
over the references' calibrations, and this module applies the rule when the catalogue is read, so the figure is
always what the shipped calibrations say and never a copy typed in by hand.

A figure {"derive": RULE, "assumption": true, "note": ...} in the catalogue becomes {"value": ..., "source":
"crossover-reference-calibration", "assumption": true, "note": note + how the value was worked out}. RULES:
- "bare_op_ratio": this CPU's op_overhead_no_grad times the geometric mean, over the references that measured the
  figure, of the figure over their own op_overhead_no_grad (Python costs scale with a host's single-thread speed,
  as its bare op does); a keyed figure (per module class) key by key;
- "reference": the figure as the newest reference that measured it calibrated it (or the one named by "machine");
- "loader_growth" (loader_per_sample): up to batch 64 the line through this CPU's batch-1 and batch-64 figures;
  above it, its batch-64 figure times the newest reference's growth over its own batch-64 figure;
- "matmul_ratio" (conv_flops): at each FLOPs per call a reference's convolution probes measured, this CPU's
  matmul_flops there times the geometric mean of the references' convolution rate over their own matmul rate
  at those FLOPs (a small convolution's fixed part, and a convolution's backward, keep it far below a GEMM's);
  below this CPU's smallest matmul size, over their matmul rate at that size; beyond the largest probe, at this
  CPU's own matmul sizes, at the ratio of the largest.
A figure no reference has measured yet, that a profile lacking it stands in for (core.model.profiles.STAND_INS), is its
stand-in's, derived by the same rule, and its note says so."""
import statistics
from pathlib import Path

from core import settings
from core.model import profiles
from core.model.costmodel import LOADER_BATCH, loader_line, loglog

SOURCE = "crossover-reference-calibration"
BARE_OP = "op_overhead_no_grad"
# Each rule and the CPU figures it may derive (in this order: a loader_growth figure grows from this CPU's own
# loader figures, which the reference rule may derive first).
DERIVABLE = {"reference": ("loader_batch1_per_sample", "loader_batched_per_sample", "op_call_seconds",
                           "op_element_seconds", "narrow_gemm_seconds"),
             "bare_op_ratio": ("op_overhead_autograd", "op_overhead_nested", "op_overhead_nested_no_grad",
                               "op_overhead_transformed",
                               "module_call", "module_call_seconds", "optimizer_step",
                               "optimizer_op_overhead"),
             "loader_growth": ("loader_per_sample",),
             "matmul_ratio": ("conv_flops",)}
RULES = tuple(DERIVABLE)
# The profile fields a reference needs for a figure a profile does not hold under its own name, or holds with
# another meaning in older profiles (profiles.EARLIER_MEANINGS: before the field its meaning changed with)
NEEDS = {"conv_flops": ("conv1d_flops", "conv2d_flops", "matmul_flops"),
         **{field: (field, later) for field, (later, _) in profiles.EARLIER_MEANINGS.items()}}


class DerivationError(ValueError):
    pass


def resolve(document: dict, results_dir: Path = None) -> dict:
    """The catalogue document with every derived CPU figure worked out from the reference profiles in
    `results_dir` (the app's own results folder by default); DerivationError naming the figure when it cannot be."""
    references = _references(document.get("references"), results_dir or settings.APP_ROOT / "results")
    for rule in RULES:
        for index, entry in enumerate(document.get("hardware") or []):
            figures = entry.get("figures") if isinstance(entry, dict) else None
            for field, spec in (figures or {}).items():
                if isinstance(spec, dict) and spec.get("derive") == rule:
                    where = f"hardware[{entry.get('name', index)!r}].figures.{field}"
                    if entry.get("kind") != "cpu" or field not in DERIVABLE[rule]:
                        raise DerivationError(f"{where}.derive: the rule '{rule}' derives a CPU's "
                                              f"{', '.join(DERIVABLE[rule])}, not a {entry.get('kind')}'s {field}")
                    figures[field] = _derived(field, spec, figures, references, where)
    return document


def _references(ids, results_dir: Path) -> list[dict]:
    if ids is None:
        return []
    if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
        raise DerivationError(f"references: {ids!r} is not a list of machine ids")
    found = []
    for machine_id in ids:
        target = profiles.path(machine_id, results_dir)
        try:
            found.append(profiles.read_checked(target))
        except ValueError as e:  # ProfileError and JSON errors are ValueErrors
            raise DerivationError(f"references: the profile of '{machine_id}' ({target}) cannot be read: {e}") from None
    return sorted(found, key=lambda p: p["taken"], reverse=True)  # newest first


def _derived(field: str, spec: dict, figures: dict, references: list[dict], where: str) -> dict:
    rule, named = spec["derive"], spec.get("machine")
    if named is not None and (rule != "reference" or named not in {r["machine_id"] for r in references}):
        raise DerivationError(f"{where}.machine: '{named}' is not one of the references, or the rule '{rule}' "
                              f"names none (only 'reference' does)")
    needs = NEEDS.get(field, (field,))
    measured = [r for r in references if all(f in r["cpu"] for f in needs) and named in (None, r["machine_id"])]
    if not measured and field in profiles.STAND_INS:  # no reference has measured it yet: derive what stands in for it
        stand_in, assumed = profiles.STAND_INS[field]
        found = _derived(stand_in, spec, figures, references, where)
        return found | {"note": f"{found['note']}; no reference machine has measured {field} yet, so {assumed}"}
    if not measured:
        raise DerivationError(f"{where}: no reference machine's profile has {' and '.join(needs)}; references: "
                              f"{', '.join(r['machine_id'] for r in references) or 'none'}")
    value, how = {"bare_op_ratio": _bare_op_ratio, "reference": _reference, "loader_growth": _loader_growth,
                  "matmul_ratio": _matmul_ratio}[rule](field, figures, measured, where)
    return {"value": value, "source": SOURCE, "assumption": True, "note": f"{spec.get('note', '')}: {how}".lstrip(": ")}


def _own(figures: dict, field: str, where: str):
    spec = figures.get(field)
    if not (isinstance(spec, dict) and "value" in spec):
        raise DerivationError(f"{where}: the rule needs this CPU's own {field}, which is missing")
    return spec["value"]


def _bare_op_ratio(field: str, figures: dict, measured: list[dict], where: str) -> tuple[object, str]:
    if isinstance(measured[0]["cpu"][field], dict):
        return _bare_op_ratio_per_key(field, figures, measured, where)
    bare = _own(figures, BARE_OP, where)
    ratios = [(r, _ratio(r, r["cpu"][field], field, where)) for r in measured]
    mean = statistics.geometric_mean(ratio for _, ratio in ratios)
    each = "; ".join(f"{_name(r)} {ratio:.3g} ({_shown(r['cpu'][field])} / {_shown(r['cpu'][BARE_OP])}, "
                     f"{_taken(r)})" for r, ratio in ratios)
    return bare * mean, (f"this CPU's bare op ({_shown(bare)}, {BARE_OP}) times {mean:.3g}, the geometric mean of "
                         f"the reference machines' ratios of this figure to their bare op ({each}); their spread is "
                         f"this assumption's uncertainty")


def _bare_op_ratio_per_key(field: str, figures: dict, measured: list[dict], where: str) -> tuple[dict, str]:
    """A keyed figure (module_call_seconds: per module class): each key as the scalar rule has it, over the
    references that measured that key."""
    bare = _own(figures, BARE_OP, where)
    keys = dict.fromkeys(key for r in measured for key in r["cpu"][field])
    value = {}
    for key in keys:
        ratios = [_ratio(r, r["cpu"][field][key], f"{field}.{key}", where) for r in measured if key in r["cpu"][field]]
        value[key] = bare * statistics.geometric_mean(ratios)
    return value, (f"per key, this CPU's bare op ({_shown(bare)}, {BARE_OP}) times the geometric mean of the "
                   f"reference machines' ratios of that key's figure to their bare op (measured by "
                   f"{'; '.join(f'{_name(r)}, {_taken(r)}' for r in measured)})")


def _ratio(reference: dict, figure: float, what: str, where: str) -> float:
    if figure <= 0:
        raise DerivationError(f"{where}: {_name(reference)}'s {what} is {figure:g}; a ratio to its bare op needs a "
                              f"figure above 0")
    return figure / reference["cpu"][BARE_OP]


def _reference(field: str, figures: dict, measured: list[dict], where: str) -> tuple[object, str]:
    newest = measured[0]
    return newest["cpu"][field], f"the reference machine {_name(newest)}'s calibration ({_taken(newest)})"


def _loader_growth(field: str, figures: dict, measured: list[dict], where: str) -> tuple[dict, str]:
    one, batched = _own(figures, "loader_batch1_per_sample", where), _own(figures, "loader_batched_per_sample", where)
    newest = measured[0]
    reference = newest["cpu"][field]
    if str(LOADER_BATCH) not in reference:
        raise DerivationError(f"{where}: {_name(newest)}'s {field} has no batch {LOADER_BATCH} to grow from")
    per_batch, per_sample = loader_line(one, batched)
    value = {size: (per_batch / int(size) + per_sample if int(size) <= LOADER_BATCH
                    else batched * seconds / reference[str(LOADER_BATCH)]) for size, seconds in reference.items()}
    growth = ", ".join(f"{int(size):,}: {seconds / reference[str(LOADER_BATCH)]:.2f}x" for size, seconds in
                       reference.items() if int(size) > LOADER_BATCH)
    return value, (f"up to batch {LOADER_BATCH} the line through this CPU's batch-1 and batch-{LOADER_BATCH} figures; "
                   f"above it, its batch-{LOADER_BATCH} figure times the growth the reference machine {_name(newest)} "
                   f"measured over its own ({_taken(newest)}: {growth})")


def _matmul_ratio(field: str, figures: dict, measured: list[dict], where: str) -> tuple[dict, str]:
    own = sorted((float(size), rate) for size, rate in _own(figures, "matmul_flops", where).items())
    ratios = [(r, _conv_over_matmul(r, own[0][0], where)) for r in measured]
    probed = {flops for _, by_flops in ratios for flops in by_flops}
    # beyond the largest probe, this CPU's own matmul sizes at the ratio there
    sizes = sorted(probed | {flops for flops, _ in own if flops > max(probed)})
    value = {}
    for flops in sizes:
        at = [loglog(sorted(by_flops.items()), flops) for _, by_flops in ratios]
        value[str(int(flops))] = loglog(own, flops) * statistics.geometric_mean(at)
    each = "; ".join(f"{_name(r)}, {_taken(r)}: " + ", ".join(f"{ratio:.2g} at {flops:.2g}" for flops, ratio in
                                                              sorted(by_flops.items())) for r, by_flops in ratios)
    return value, (f"at each FLOPs per call a reference machine's convolution probes measured, this CPU's matmul_flops "
                   f"there times the geometric mean of the reference machines' convolution rate over their matmul "
                   f"rate at those FLOPs ({each})")


def _conv_over_matmul(reference: dict, smallest: float, where: str) -> dict[float, float]:
    """A reference's convolution rate over its matmul rate (log-log between its sizes), by FLOPs per call; below
    `smallest` (this CPU's smallest matmul size, where its own rate stops) over its matmul rate there, so that the
    two matmul rates stop at the same size."""
    matmul = sorted(profiles.matmul_rates(reference["cpu"]).items())
    try:
        conv = profiles.conv_rates(reference["cpu"])
    except profiles.ProfileError as e:
        raise DerivationError(f"{where}: {_name(reference)}'s {e}") from None
    return {flops: rate / loglog(matmul, max(flops, smallest)) for flops, rate in conv.items()}


def _name(profile: dict) -> str:
    return f"{profile['fingerprint'].get('cpu_model') or profile['machine_id']} ({profile['machine_id']})"


def _taken(profile: dict) -> str:
    return f"calibrated {profile['taken'][:16].replace('T', ' ')} UTC"


def _shown(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us"
