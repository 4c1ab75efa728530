"""The hardware a prediction runs on (core.model.costmodel): one CPU or GPU is a `Device` with its figures, a host CPU and
an optional GPU a `Target`. Figures come from two places: core/hardware.json, a catalogue of published figures per
piece of hardware (every figure not measured on that hardware marked as an assumption, with a note; a CPU's figures
that no one publishes derived from Crossover's reference machines by core.model.reference_figures as the file is read)
and of the hardware each write-up ran on; and calibrated profiles (core.model.profiles): this machine's and every other machine's
whose profile sits in the results folder.

Names `resolve` takes, case-insensitive: "this" (this machine's CPU; without its profile, the nearest CPU stands in for
it: `nearest_cpu`), "this:cuda:N", a calibrated machine's id and "<id>:cuda:N", a catalogue name or alias. A sized
figure's value is {FLOPs per call: rate}, interpolated log-log; a keyed one's {operation: value}."""
import json
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping

import jsonschema

from core import devices, settings
from core.model import costmodel, profiles, reference_figures

CATALOGUE_PATH = Path(__file__).with_name("hardware.json")
SCHEMA_VERSION = 1
THIS = "this"
TYPICAL_CPU = "typical-cpu"  # the catalogue's CPU for one no other is nearer to (nearest_cpu)
KINDS = ("cpu", "gpu")
FIELDS = {
    "cpu": ("op_overhead_autograd", "op_overhead_nested", "op_overhead_nested_no_grad", "op_overhead_transformed",
            "op_overhead_no_grad",
            "module_call", "module_call_seconds", "optimizer_step", "optimizer_op_overhead",
            "loader_batch1_per_sample", "loader_batched_per_sample", "loader_per_sample",
            "matmul_flops", "conv_flops", "conv_one_channel_flops", "conv_backward_share", "elementwise_rate",
            "memory_bandwidth",
            "op_call_seconds", "op_element_seconds", "narrow_gemm_seconds", "gemm_seconds", "linear_seconds",
            "flash_attention_seconds", "flash_attention_backward_seconds"),
    "gpu": ("matmul_flops", "conv_flops", "memory_bandwidth", "launch_overhead", "shortest_kernel", "sync_round_trip",
            "h2d_latency_pageable", "h2d_latency_pinned", "d2h_latency_pageable", "d2h_latency_pinned",
            "h2d_bandwidth_pageable", "h2d_bandwidth_pinned", "d2h_bandwidth_pageable", "d2h_bandwidth_pinned",
            "graph_replay_fixed", "graph_replay_per_node", "kernel_enqueue", "memory_gib"),
}
# A GPU's memory: a calibrated one's from its machine's fingerprint (what PyTorch reports), never a probe's
MEMORY = "memory_gib"
# Figures only a calibration measures, and only since some shipped profiles were taken: a device without one is
# priced by the rule it refines. No catalogue entry has them: a GPU's are the host's costs of driving it (so a GPU
# driven by another machine's CPU leaves them out); a CPU's, its garbage collector's full collections in a
# DataLoader, a NumPy row's cost there, sort's cost by row length, oneDNN's fused LSTM layer's rates and GEMMs with a
# weight past the caches, which no one publishes
CALIBRATED_ONLY = {"cpu": (*costmodel.COLLECTION_FIGURES, costmodel.NUMPY_FIELD, costmodel.SORT_ROWS,
                           *costmodel.LSTM_RATES.values(), costmodel.WIDE_GEMM),
                   "gpu": ("training_op_overhead",)}
UNITS = {f.name: f.unit for f in profiles.FIELDS} | {"conv_flops": "FLOP/s", MEMORY: "GiB"}
KEY_FIGURES = {"cpu": (("op", "op_overhead_no_grad"), ("matmul", "matmul_flops"), ("bandwidth", "memory_bandwidth")),
               "gpu": (("matmul", "matmul_flops"), ("bandwidth", "memory_bandwidth"), ("launch", "launch_overhead"),
                       ("h2d pinned", "h2d_bandwidth_pinned"), ("memory", MEMORY))}  # a figure a device lacks: left out
NAME_PATTERN = r"^[a-z0-9][a-z0-9.-]*$"  # a slug: never "this", never "<machine>:cuda:N"
SIZE_PATTERN = r"^[0-9]+(\.[0-9]+)?([eE]\+?[0-9]+)?$"  # FLOPs per call
KEYED = profiles.KEYS  # figures {key: value}, the key an op, a width, a batch or a module class, not FLOPs per call
GEMM_GRIDS = profiles.GEMM_FIGURES  # a CPU's GEMM times by shape: none for a catalogue CPU
GEMM_BY_FLOPS = "a GEMM costs its FLOPs at matmul_flops, at least its left operand at narrow_gemm_seconds"
# What the cost model assumes where an older profile lacks a keyed figure.
UNMEASURED = {"op_call_seconds": "these operations cost an add's time", "op_element_seconds": "these operations cost "
              "an add's time", "narrow_gemm_seconds": "a narrow GEMM costs its FLOPs' time, as a square one does",
              "loader_per_sample": "a DataLoader costs the line through its batch-1 and batch-64 figures at any batch",
              "module_call_seconds": "every module call costs a bare module's (module_call)",
              "conv_one_channel_flops": "a convolution with few input channels costs conv_flops' rate, as a "
                                        "16-channel one does",
              "conv_backward_share": "a convolution's forward and backward call each cost their FLOPs at conv_flops' "
                                     "rate",
              **{field: GEMM_BY_FLOPS for field in GEMM_GRIDS},
              **dict.fromkeys(profiles.ATTENTION_FIGURES, "flash attention costs, per block, its GEMMs at what GEMMs of "
                              "their shapes cost and an exp per score, as if one thread ran them all")}
GPU_NAME = re.compile(r"^(?P<machine>.+):(?P<device>cuda:[0-9]+)$")
CLIP = 400  # characters of a list of names in a message


class HardwareError(ValueError):
    pass


@dataclass(frozen=True)
class Figure:
    """One figure: a number; for a sized figure ((FLOPs per call, rate), ...) in increasing FLOPs; for a keyed one
    (KEYED) {key: number}. `source` a catalogue source id (or the calibration that measured it), `citation` that
    source in words."""
    value: float | tuple[tuple[float, float], ...] | dict[str, float]
    source: str | None
    assumption: bool
    note: str
    citation: str = ""
    beyond: tuple[tuple[float, float], ...] = ()  # a sized figure's points past its own, from another source (noted)

    @property
    def keyed(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def sized(self) -> bool:
        return isinstance(self.value, tuple)

    def at(self, flops: float = None) -> float | dict[str, float]:
        """The value (a keyed one's {key: value}); a sized one at `flops` per call, interpolated log-log between
        its sizes (and those `beyond` them) and clamped at its ends, or at its own largest size when `flops` is
        None."""
        if not self.sized:
            return self.value
        if flops is None:
            return self.value[-1][1]
        return costmodel.loglog(self.value + self.beyond, flops)


@dataclass(frozen=True)
class Device:
    """One CPU or GPU: `name` as `resolve` takes it, `kind` 'cpu' or 'gpu', `origin` 'catalogue' or 'calibrated',
    `machine` the id of the machine a calibrated one is part of."""
    name: str
    title: str
    kind: str
    origin: str
    figures: Mapping[str, Figure]
    machine: str | None = None
    peak: Mapping[str, float] = field(default_factory=dict)  # the maker's peaks: what no figure of it can exceed

    def value(self, field: str, flops: float = None) -> float:
        """A figure's value; a sized one at `flops` per call (see Figure.at)."""
        figure = self.figures.get(field)
        if figure is None:
            raise HardwareError(f"field: '{_clip(field, 60)}' is not a {self.kind} figure; {self.kind} figures: "
                                f"{', '.join(FIELDS[self.kind])}")
        return figure.at(flops)

    def has(self, field: str) -> bool:
        return field in self.figures

    @property
    def assumptions(self) -> list[str]:
        """The fields whose figure was not measured on this device."""
        return [field for field, figure in self.figures.items() if figure.assumption]


@dataclass(frozen=True)
class Target:
    """What a prediction runs on: a host CPU, and the GPU it drives (None: the workload runs on the CPU)."""
    host: Device
    gpu: Device | None = None

    def __post_init__(self):
        if self.host.kind != "cpu":
            raise HardwareError(f"host: '{self.host.name}' is a {self.host.kind}; a host is a CPU")
        if self.gpu is not None and self.gpu.kind != "gpu":
            raise HardwareError(f"gpu: '{self.gpu.name}' is a {self.gpu.kind}, not a GPU")

    @property
    def name(self) -> str:
        return (self.gpu or self.host).name

    @property
    def title(self) -> str:
        return f"{self.gpu.title} driven by {self.host.title}" if self.gpu else self.host.title


@dataclass(frozen=True)
class Catalogue:
    devices: dict[str, Device]  # by name
    names: dict[str, str]       # every name, title and alias, as _spelling spells it -> name
    writeups: dict[str, dict]   # by write-up source file
    sources: dict[str, dict]


# The catalogue file.

def _schema(source_ids: list[str]) -> dict:
    text = {"type": "string", "minLength": 1}
    positive = {"type": "number", "exclusiveMinimum": 0}
    # a keyed figure may be empty (none of its keys measured: the cost model's fallback), a sized one may not
    keys = {field: {"properties": {"value": ({"type": "object", "propertyNames": {"pattern": KEYED[field]},
                                              "additionalProperties": {"type": "number", "minimum": 0}}
                                             if field in KEYED else
                                             {"minProperties": 1, "propertyNames": {"pattern": SIZE_PATTERN},
                                              "additionalProperties": positive})}}
            for fields in FIELDS.values() for field in fields}
    # a figure has a value, or (a CPU's assumption) a rule deriving it from the reference machines (core.model.reference_figures)
    derived = {"required": ["derive"], "properties": {"source": False}}
    figure = {"type": "object", "required": ["assumption", "note"], "additionalProperties": False,
              "properties": {"value": {"if": {"type": "object"}, "else": positive},
                             "derive": {"enum": list(reference_figures.RULES)}, "machine": text,
                             "source": {"enum": source_ids}, "assumption": {"type": "boolean"}, "note": text},
              "oneOf": [{"required": ["value"], "not": {"anyOf": [{"required": ["derive"]}, {"required": ["machine"]}]}},
                        derived],
              "if": {"properties": {"assumption": {"const": False}}}, "then": {"required": ["source"]}}
    per_kind = [{"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                 "then": {"properties": {"figures": {"required": list(fields), "propertyNames": {"enum": list(fields)},
                                                     "properties": {f: keys[f] for f in fields}}}}}
                for kind, fields in FIELDS.items()]
    entry = {"type": "object", "required": ["name", "title", "kind", "aliases", "figures"], "additionalProperties": False,
             "properties": {"name": {"type": "string", "pattern": NAME_PATTERN}, "title": text, "kind": {"enum": list(KINDS)},
                            "aliases": {"type": "array", "items": text}, "figures": {"type": "object",
                                                                                     "additionalProperties": figure},
                            "peak": {"type": "object", "required": ["source"], "additionalProperties": False,
                                     "properties": {"memory_bandwidth": positive, "matmul_flops": positive,
                                                    "source": {"enum": source_ids},
                                                    # float16 tensor cores' (core.model.whatifs), with its own source
                                                    "matmul_flops_half": positive,
                                                    "half_source": {"enum": source_ids}},
                                     "dependentRequired": {"matmul_flops_half": ["half_source"]}}},
             "allOf": per_kind}
    source = {"type": "object", "required": ["title"], "additionalProperties": False,
              "properties": {"title": text, "url": {"type": "string", "pattern": "^https://"}, "where": text},
              "anyOf": [{"required": ["url"]}, {"required": ["where"]}]}
    writeup = {"type": "object", "required": ["gpu", "cpu", "assumed", "note"], "additionalProperties": False,
               "properties": {"gpu": text, "cpu": text, "assumed": {"type": "boolean"}, "note": text}}
    return {"type": "object", "required": ["schema", "sources", "hardware", "writeups"], "additionalProperties": False,
            "properties": {"schema": {"const": SCHEMA_VERSION}, "about": {"type": "string"},
                           "references": {"type": "array", "items": {"type": "string", "pattern": profiles.MACHINE_ID_PATTERN}},
                           "sources": {"type": "object", "additionalProperties": source},
                           "hardware": {"type": "array", "minItems": 1, "items": entry},
                           "writeups": {"type": "object", "additionalProperties": writeup}}}


def validate(document: dict) -> None:
    """Raise HardwareError naming the first field of a catalogue document that is missing, unknown or out of range:
    every figure has a known source or is an assumption with a note, every entry has every figure of its kind, every
    value is positive, a figure derived from the reference machines (core.model.reference_figures) is an assumption and
    not also typed in, names and aliases are unique, and every write-up names a GPU and a CPU of the catalogue."""
    _check_derived(document)
    sources = document.get("sources") if isinstance(document, dict) else None
    source_ids = sorted(sources) if isinstance(sources, dict) else []
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(_schema(source_ids)).iter_errors(document))
    if error is not None:
        raise HardwareError(f"{_where(document, error.absolute_path)}: {_clip(error.message, CLIP)}")
    kinds = _check_names(document["hardware"])
    for source, entry in document["writeups"].items():
        for kind in KINDS:
            if kinds.get(entry[kind]) != kind:
                raise HardwareError(f"writeups[{source!r}].{kind}: '{_clip(entry[kind], 60)}' is no {kind} of the "
                                    f"catalogue; its {kind}s: {', '.join(n for n, k in kinds.items() if k == kind)}")


def _check_derived(document) -> None:
    """A derived figure (core.model.reference_figures) is an assumption, and is not also typed in."""
    entries = document.get("hardware") if isinstance(document, dict) else None
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        figures = entry.get("figures") if isinstance(entry, dict) else None
        for field, figure in (figures.items() if isinstance(figures, dict) else []):
            if not (isinstance(figure, dict) and "derive" in figure):
                continue
            where = f"{_where(document, ['hardware', index])}.figures.{field}"
            if "value" in figure:
                raise HardwareError(f"{where}: a figure is typed in ('value') or derived ('derive'), not both")
            if figure.get("assumption") is not True:
                raise HardwareError(f"{where}.assumption: a figure derived from the reference machines is an "
                                    f"assumption (true)")


def _where(document: dict, path) -> str:
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "hardware" and isinstance(parts[1], int):
        entry = document["hardware"][parts[1]]
        name = entry.get("name") if isinstance(entry, dict) else None
        parts = [f"hardware[{name!r}]" if isinstance(name, str) else f"hardware[{parts[1]}]", *parts[2:]]
    return ".".join(map(str, parts)) or "catalogue"


def _check_names(entries: list[dict]) -> dict[str, str]:
    """Every entry's name -> kind; refused when a name, title or alias is spelled like another entry's."""
    seen = {}
    for entry in entries:
        for spelling in _spellings(entry):
            if spelling == THIS or GPU_NAME.match(spelling):
                raise HardwareError(f"hardware[{entry['name']!r}]: '{spelling}' is reserved for calibrated machines")
            if spelling in seen:
                raise HardwareError(f"hardware[{entry['name']!r}]: '{spelling}' is already a name of {seen[spelling]!r}")
            seen[spelling] = entry["name"]
    return {entry["name"]: entry["kind"] for entry in entries}


def _spellings(entry: dict) -> set[str]:
    return {_spelling(text) for text in [entry["name"], entry["title"], *entry["aliases"]]}


def load(path: Path = CATALOGUE_PATH) -> Catalogue:
    """Read and check a catalogue file."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HardwareError(f"catalogue {path}: {e}") from None
    validate(document)
    try:
        reference_figures.resolve(document)
    except reference_figures.DerivationError as e:
        raise HardwareError(f"catalogue {path}: {e}") from None
    sources = document["sources"]
    entries = {entry["name"]: _catalogue_device(entry, sources) for entry in document["hardware"]}
    names = {spelling: entry["name"] for entry in document["hardware"] for spelling in _spellings(entry)}
    return Catalogue(entries, names, document["writeups"], sources)


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    """The shipped catalogue, read once."""
    return load()


def _catalogue_device(entry: dict, sources: dict) -> Device:
    figures = {field: Figure(_value(field, spec["value"]), spec.get("source"), spec["assumption"], spec["note"],
                             _citation(sources, spec.get("source")))
               for field, spec in entry["figures"].items()}
    peak = {name: value for name, value in entry.get("peak", {}).items() if not name.endswith("source")}
    return Device(entry["name"], entry["title"], entry["kind"], "catalogue", figures, peak=peak)


def _citation(sources: dict, source_id: str | None) -> str:
    if source_id is None:
        return "no source: an assumption"
    source = sources[source_id]
    return f"{source['title']} ({source.get('url') or source['where']})"


def _value(field: str, value) -> float | tuple[tuple[float, float], ...] | dict[str, float]:
    if field in KEYED:
        return {key: float(number) for key, number in value.items()}
    if not isinstance(value, dict):
        return float(value)
    points = sorted((float(size), float(rate)) for size, rate in value.items())
    if len({size for size, _ in points}) < len(points):
        raise HardwareError(f"{field}: two sizes name the same FLOPs per call")
    return tuple(points)


# Calibrated profiles.

def from_profile(profile: dict, device: str) -> Device:
    """A calibrated profile's section ('cpu' or 'cuda:N') as a Device: matmul sizes n as 2n^3 FLOPs per call, the
    conv1d and conv2d probes' input shapes through their layers, merged into conv_flops; graph_replay_fixed and
    kernel_enqueue taken as launch_overhead where the profile lacks them (noted)."""
    try:
        profiles.validate(profile)
    except profiles.ProfileError as e:
        raise HardwareError(f"profile: {e}") from None
    machine, sections = profile["machine_id"], profiles.sections(profile)
    if device not in sections:
        who = settings.this_host() if machine == devices.fingerprint()["machine_id"] else f"machine {machine}"
        raise HardwareError(f"device: {who} has no calibrated '{_clip(device, 60)}'; it has: {', '.join(sections)}")
    kind = "cpu" if device == "cpu" else "gpu"
    name, title = _calibrated_names(profile, device)
    memory = {MEMORY: g["memory_gib"] for g in profile["fingerprint"]["gpus"] if g.get("device") == device
              and costmodel.is_positive(g.get("memory_gib"))}  # a hand-made fingerprint may lack it
    found = _section_device(name, title, kind, sections[device] | memory,
                            f"calibrated on {machine} {profile['taken'][:10]}", machine)
    twin = catalogue_twin(profile, device)
    if twin is None or not twin.has("matmul_flops"):
        return found
    rate = _past_probes(found.figures["matmul_flops"], twin.figures["matmul_flops"], twin.title)
    return replace(found, figures={**found.figures, "matmul_flops": rate})


def catalogue_twin(profile: dict, device: str) -> Device | None:
    """The catalogue's entry for the model of a profile's GPU `device` (by the name its fingerprint gives: 'NVIDIA
    H200' is the catalogue's H200), None for a CPU or a GPU the catalogue does not list."""
    name = next((g.get("name") for g in profile["fingerprint"]["gpus"] if g.get("device") == device), None)
    book = catalogue()
    key = book.names.get(_spelling(name)) if name else None
    return book.devices[key] if key else None


def _past_probes(own: Figure, theirs: Figure, title: str) -> Figure:
    """A calibrated GPU's matrix-product rate with, past its largest probe, the catalogue's figures for its model at
    those sizes (at least the largest probe's rate): a GPU's probes stop while a product is still mostly its launch
    (a quick calibration's at 256x256 or 1024x1024), and that probe's rate held to any size would price a 4096x4096
    product 30 times its time on the GPU that measured both (an H200 at 256 and 4096)."""
    largest, rate = own.value[-1]
    beyond = tuple((flops, max(theirs_rate, rate)) for flops, theirs_rate in theirs.value if flops > largest)
    if not beyond:
        return own
    return replace(own, beyond=beyond, note=f"{own.note}; past its largest probe ({largest:.3g} FLOPs), the "
                   f"catalogue's {title} ({theirs.citation}), at least that probe's rate")


def unmeasured(device: Device) -> list[str]:
    """The figures a calibrated device's profile stands in for or lacks, as calibrate measures them now."""
    return [*device.assumptions, *(field for field in CALIBRATED_ONLY[device.kind] if not device.has(field))]


def calibrating(host: dict, gpu: dict) -> Target:
    """A host and a GPU as the figures a calibration has measured of them so far in its pass (every figure the cost
    model reads, as a profile section holds them): what its probes of the GPU's host costs price a step at."""
    source, machine = "the calibration going on", devices.fingerprint()["machine_id"]
    return Target(_section_device("calibrating-cpu", "the CPU being calibrated", "cpu", host, source, machine),
                  _section_device("calibrating-gpu", "the GPU being calibrated", "gpu", gpu, source, machine))


def _section_device(name: str, title: str, kind: str, section: dict, source: str, machine: str) -> Device:
    fields = (*(field for field in FIELDS[kind] if field != MEMORY or field in section),
              *(field for field in CALIBRATED_ONLY[kind] if field in section))
    return Device(name, title, kind, "calibrated", {field: _calibrated_figure(field, section, source) for field in fields},
                  machine)


def _calibrated_names(profile: dict, device: str) -> tuple[str, str]:
    machine = profile["machine_id"]
    ours = machine == devices.fingerprint()["machine_id"]
    if device == "cpu":
        return (THIS, f"{settings.this_host()}'s CPU") if ours else (
            machine, f"{profile['fingerprint']['cpu_model']} ({machine})")
    gpu = next((g["name"] for g in profile["fingerprint"]["gpus"] if g.get("device") == device), "GPU")
    if ours:
        return f"{THIS}:{device}", f"{gpu} ({settings.this_host()}'s {device})"
    return f"{machine}:{device}", f"{gpu} ({device} of {machine})"


def _calibrated_figure(field: str, section: dict, source: str) -> Figure:
    describe = {f.name: f.description for f in profiles.FIELDS}
    if field == "matmul_flops":
        value = profiles.matmul_rates(section)
        return Figure(_value(field, value), source, False, describe[field] + ", as 2n^3 FLOPs per call", source)
    if field == "conv_flops":
        try:
            value = profiles.conv_rates(section)
        except profiles.ProfileError as e:
            raise HardwareError(str(e)) from None
        note = f"{describe['conv1d_flops']} and {describe['conv2d_flops']}, merged by FLOPs per call"
        return Figure(_value(field, value), source, False, note, source)
    if field in profiles.STAND_INS and field not in section:
        stand_in, assumed = profiles.STAND_INS[field]
        return Figure(section[stand_in], source, True, f"not in the profile: {assumed} ({stand_in})", source)
    if field in KEYED:
        if field not in section:
            return Figure({}, source, True, f"not in the profile (calibrated before calibrate measured it): "
                          f"{UNMEASURED[field]}", source)
        return Figure(_value(field, section[field]), source, False, describe[field], source)
    if field == "elementwise_rate":
        return Figure(_value(field, section[field]), source, False, describe[field] + ", as FLOPs per call", source)
    if field == MEMORY:
        return Figure(float(section[field]), source, False, "its memory as PyTorch reports it (the machine's "
                      "fingerprint)", source)
    return Figure(float(section[field]), source, False, describe.get(field, field), source)


# Names.

def _key(name) -> str:
    return " ".join(str(name).lower().split())


def _spelling(name) -> str:
    """A catalogue name as looked up: case, spaces, hyphens and underscores do not count ('RTX 3080 Ti' is
    'rtx-3080-ti')."""
    return re.sub(r"[\s_-]+", " ", str(name).lower()).strip()


def _clip(text, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def device_named(name: str, what: str = "hardware") -> Device:
    """The Device a name stands for (see the module's doc); `what` names the argument in errors."""
    key = _key(name)
    if key == THIS:
        return _calibrated(None, "cpu", what)
    gpu = GPU_NAME.match(key)
    if gpu:
        machine = gpu["machine"]
        return _calibrated(None if machine == THIS else machine, gpu["device"], what)
    book = catalogue()
    if _spelling(key) in book.names:
        return book.devices[book.names[_spelling(key)]]
    profile = _profile(key) if re.fullmatch(profiles.MACHINE_ID_PATTERN, key) else None
    if profile is not None:
        return from_profile(profile, "cpu")
    raise HardwareError(f"{what}: unknown hardware '{_clip(name, 60)}'; known: {_known_names()} "
                        f"(or a catalogue alias)")


def _calibrated(machine: str | None, device: str, what: str) -> Device:
    if machine is not None and not re.fullmatch(profiles.MACHINE_ID_PATTERN, machine):
        raise HardwareError(f"{what}: '{_clip(machine, 60)}' is no machine id; known: {_known_names()}")
    profile = _profile(machine)
    if profile is None and machine is None and device == "cpu":
        return _stand_in_for_this()
    if profile is None:
        raise HardwareError(f"{what}: {profiles.missing_message(None if machine is None else _clip(machine, 60))}")
    return from_profile(profile, device)


def _catalogue_cpus() -> list[str]:
    return [d.name for d in catalogue().devices.values() if d.kind == "cpu"]


def _profile(machine: str | None) -> dict | None:
    try:
        return profiles.load(machine)
    except OSError:  # a name no file can have (too long, say): no machine has it
        return None


def _known_names() -> str:
    names = [row["name"] for row in listing()]
    shown, length = [], 0
    for name in names:
        length += len(name) + 2
        if length > CLIP:
            break
        shown.append(name)
    rest = len(names) - len(shown)
    return ", ".join(shown) + (f", … and {rest} more (python -m core predict --on list)" if rest else "")


def resolve(name: str, host: str = THIS) -> Target:
    """The Target a name stands for: a CPU alone, or a GPU driven by `host` (a CPU's name)."""
    device = device_named(name)
    if device.kind == "cpu":
        return Target(device)
    driver = device_named(host, what="host")
    if driver.kind != "cpu":
        raise HardwareError(f"host: '{_clip(host, 60)}' is a GPU; a host is a CPU: {THIS}, a calibrated machine's "
                            f"id or {', '.join(_catalogue_cpus())}")
    if device.machine != driver.machine:  # its own host's costs of driving it were another CPU's: left out
        device = replace(device, figures={field: figure for field, figure in device.figures.items()
                                          if field not in CALIBRATED_ONLY["gpu"]})
    return Target(driver, device)


# This machine's CPU without a profile: the nearest CPU stands in for it.

def nearest_cpu(fingerprint: dict = None, calibrated: dict[str, dict] = None) -> tuple[str, str]:
    """The CPU nearest a machine's (this one's by default), as a name `resolve` takes and a short reason naming it,
    among the calibrated machines' (`calibrated`: profiles by machine id; default, every profile in the results folder)
    and the catalogue's: a calibrated machine with the same CPU model name first (the same design by the CPUs'
    signatures before an unknown one, before another; then the closest count of logical cores, physical cores and
    torch threads; a full calibration before a quick one, the latest first), then the catalogue's entry for that model,
    else the catalogue's typical CPU."""
    fp = fingerprint or devices.fingerprint()
    model = _spelling(fp.get("cpu_model") or "")
    found = profiles.all() if calibrated is None else calibrated
    same = [profile for machine, profile in found.items() if machine != fp.get("machine_id")
            and model and _spelling(profile["fingerprint"].get("cpu_model") or "") == model]
    if same:
        latest_first = sorted(same, key=lambda profile: profile["taken"], reverse=True)
        best = min(latest_first, key=lambda profile: (*_nearness(fp, profile["fingerprint"]), profile["quick"]))
        theirs = best["fingerprint"]
        design = [", the same design,", "", None][_nearness(fp, theirs)[0]]
        if design is None:
            design = f" (another design: {re.sub(r'^vendor_id [^,]*, ', '', theirs['cpu_signature'])})"
        return best["machine_id"], (f"{_calibrated_names(best, 'cpu')[1]}, a calibrated machine with the same CPU "
                                    f"model{design} and {_cores_text(theirs, fp)}")
    book = catalogue()
    named = book.names.get(model) if model else None
    if named and book.devices[named].kind == "cpu":
        return named, f"{book.devices[named].title}, the catalogue's entry for the same CPU model"
    whose = f"{settings.this_host()}'s" if fingerprint is None else "its"
    return TYPICAL_CPU, (f"{book.devices[TYPICAL_CPU].title}, the catalogue's typical CPU: no calibrated machine and "
                         f"no catalogue entry has {whose} CPU model ({_clip(fp.get('cpu_model') or 'unknown', 60)})")


CORE_COUNTS = ("cpu_logical_cores", "cpu_physical_cores", "torch_threads")


def _nearness(ours: dict, theirs: dict) -> tuple:
    """How far another machine's fingerprint is from ours, smallest nearest: its design (0 the same signature, 1
    unknown, 2 another), then the difference of each of CORE_COUNTS."""
    mine, other = ours.get("cpu_signature"), theirs.get("cpu_signature")
    design = 1 if not (mine and other) else 0 if mine == other else 2
    return (design, *(abs((theirs.get(count) or 0) - (ours.get(count) or 0)) for count in CORE_COUNTS))


def _cores_text(theirs: dict, ours: dict) -> str:
    """'2 cores', '8 cores, 16 threads', with ours where they differ: '16 cores (this machine has 2)'."""
    def text(fp: dict) -> str:
        logical, physical = fp.get("cpu_logical_cores"), fp.get("cpu_physical_cores")
        split = physical and logical and physical != logical
        return f"{physical} cores, {logical} threads" if split else f"{logical} cores"
    shown = text(theirs)
    return shown if shown == text(ours) else f"{shown} ({settings.this_host()} has {text(ours).removesuffix(' cores')})"


_LISTENERS: list[Callable[[str], None]] = []


@contextmanager
def telling_stand_ins(say: Callable[[str], None]):
    """While inside, `say` hears stand_in_note once whenever the nearest CPU stands in for this machine's (the CLI prints
    it to stderr)."""
    told = set()

    def once(note: str) -> None:
        if note not in told:
            told.add(note)
            say(note)
    _LISTENERS.append(once)
    try:
        yield
    finally:
        _LISTENERS.remove(once)


def stand_in_note(reason: str) -> str:
    """What to tell someone whose prediction needed this machine's CPU, which has no calibrated profile: whose figures
    stand in for it (`reason`: nearest_cpu's), and how to calibrate it."""
    host = settings.this_host()
    return (f"{host} has no calibrated profile, so the figures of its CPU are another CPU's: the nearest one, {reason}. "
            f"A prediction for {host}'s own CPU needs its calibration: run `python -m core calibrate` "
            f"({profiles.CALIBRATION_TIME})")


def _stand_in_for_this() -> Device:
    name, reason = nearest_cpu()
    for say in list(_LISTENERS):
        say(stand_in_note(reason))
    return device_named(name, what="host")


def writeup_target(source: str) -> tuple[Target, str]:
    """The hardware a write-up (its source file, as core/published.json names it) ran on, and a note saying what it
    names and what is assumed."""
    book = catalogue()
    entry = book.writeups.get(source)
    if entry is None:
        raise HardwareError(f"source: no write-up '{_clip(source, 60)}'; known: {', '.join(book.writeups)}")
    return Target(book.devices[entry["cpu"]], book.devices[entry["gpu"]]), entry["note"]


# The list `--on list` shows.

def _calibrated_devices() -> list[Device]:
    """Every calibrated device, this machine's first; a profile that cannot be read as figures is skipped with a
    warning naming it, as core.model.profiles skips a malformed file."""
    ours = devices.fingerprint()["machine_id"]
    found = profiles.all()
    listed = []
    for machine in sorted(found, key=lambda machine: machine != ours):
        try:
            listed += [from_profile(found[machine], device) for device in ["cpu", *found[machine]["gpus"]]]
        except HardwareError as e:
            warnings.warn(f"skipping the calibration profile of {machine}: {e}", stacklevel=3)
    return listed


def listing() -> list[dict]:
    """One row per device a name can reach: this machine's and other calibrated machines' devices, then the
    catalogue's; key figures in display units, and how many figures are assumptions."""
    return [{"name": device.name, "title": device.title, "kind": device.kind, "origin": device.origin,
             "key figures": _key_figures(device), "assumptions": len(device.assumptions)}
            for device in [*_calibrated_devices(), *catalogue().devices.values()]]


def _key_figures(device: Device) -> str:
    shown = []
    for label, field in KEY_FIGURES[device.kind]:
        if not device.has(field):
            continue
        number, unit = profiles.human(device.value(field), UNITS[field])
        shown.append(f"{label} {number} {unit}")
    return ", ".join(shown)
