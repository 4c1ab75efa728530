"""A model described with a form (core.predict.families), answered: its predicted time on a CPU and on the GPUs the
reader picks, each with the range the model's measured error gives it, whether a GPU helps, where each GPU overtakes
the CPU as the batch grows, where the time goes on a GPU, and what an expert's fixes would change
(core.model.whatifs). Everything here is predicted: the census of each call is taken on the meta device from a model
built there, so nothing is computed or allocated, and nothing the reader typed is run."""
import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd
import torch

from core import devices, settings
from core.model import costmodel, hardware, whatifs
from core.predict import families, ownmodel, uncertainty
from core.store import files

SWEEP = ownmodel.SWEEP  # the crossover chart's batch sizes: the CLI's, so that both find the same crossover
LARGER = 4  # the larger-batch what-if: this many times the batch, where it fits
EAGER, LARGER_BATCH = "as described (eager)", f"a {LARGER}x larger batch"
SWEEP_COLUMNS = ["batch", "hardware", "kind", "per_sample_s", "low_s", "high_s", "fits"]


@dataclass(frozen=True)
class Timed:
    """One predicted call on one target: seconds per call and per sample, the likely range per call (None without
    a measured error for its regime), its regime and parts, the GPU's idle seconds, and the error band the range
    came from."""
    hardware: str
    device: str
    batch: int
    seconds: float
    likely: tuple[float, float] | None
    regime: str
    parts: dict
    gpu_idle: float = 0.0
    notes: tuple[str, ...] = ()
    band: uncertainty.Band | None = None

    @property
    def per_sample(self) -> float:
        return self.seconds / self.batch


@dataclass(frozen=True)
class WhatIf:
    """A fix as the cost model sees it: its name, how it is modelled, and the predicted call (None: not predicted,
    `why` says so)."""
    name: str
    how: str
    timed: Timed | None
    why: str = ""


@dataclass
class Answer:
    cpu: Timed
    gpus: list[Timed]
    speedups: dict[str, dict] = field(default_factory=dict)  # by GPU title: uncertainty.speedup()'s
    memory: dict[str, dict] = field(default_factory=dict)  # by GPU title: needed and held GiB, fits


@lru_cache(maxsize=256)
def census(description: families.Description, batch: int, on_gpu: bool) -> dict:
    """The census of one call at `batch`, on the GPU's stand-in (its input copied in from pageable memory) or the
    CPU's, of the model built on the meta device."""
    with torch.device("meta"):
        model = families.build(description)
    return ownmodel.take(model, families.input_of(description).at(batch), description.train, on_gpu)


@lru_cache(maxsize=64)
def memory_needed(description: families.Description, batch: int) -> float:
    """Bytes one call needs on a GPU at the least (ownmodel.memory_needed)."""
    with torch.device("meta"):
        model = families.build(description)
    return ownmodel.memory_needed(model, census(description, batch, True), description.train)


def timed(found: dict, target: hardware.Target, batch: int, bands: list) -> Timed:
    """A census predicted on a target, with its range."""
    prediction, regime, band = ownmodel.banded(found, target, bands)
    return Timed(target.title, target.name, batch, prediction.seconds, band.range(prediction.seconds) if band else None,
                 regime, prediction.parts, prediction.gpu_idle, prediction.notes, band)


def answer(description: families.Description, cpu: hardware.Target, gpus: list[hardware.Target]) -> Answer:
    """The call as described on the CPU and on each GPU, each GPU's speedup over the CPU and whether it fits."""
    bands, batch = uncertainty.load(), description.batch
    found = Answer(timed(census(description, batch, False), cpu, batch, bands), [])
    for gpu in gpus:
        on_gpu = timed(census(description, batch, True), gpu, batch, bands)
        found.gpus.append(on_gpu)
        found.speedups[gpu.title] = uncertainty.speedup(
            (found.cpu.seconds, found.cpu.band), (on_gpu.seconds, on_gpu.band),
            uncertainty.band_for(bands, uncertainty.SPEEDUP, on_gpu.regime))
        found.memory[gpu.title] = _memory(description, batch, gpu)
    return found


def _memory(description: families.Description, batch: int, gpu: hardware.Target) -> dict:
    needed = memory_needed(description, batch) / ownmodel.GIB
    held = ownmodel.memory_gib(gpu)
    return {"needed_gib": needed, "held_gib": held, "fits": held is None or needed <= held}


def sweep(description: families.Description, cpu: hardware.Target, gpus: list[hardware.Target]) -> pd.DataFrame:
    """Predicted seconds per sample at each of SWEEP's batch sizes (and the one described) on the CPU and each GPU,
    with the likely range and whether a GPU's batch fits its memory (a CPU's always does here)."""
    bands, rows = uncertainty.load(), []
    for batch in sorted({*SWEEP, description.batch}):
        at = _at_batch(description, batch)
        if at is None:
            continue
        for target in (cpu, *gpus):
            found = timed(census(at, batch, target.gpu is not None), target, batch, bands)
            low, high = found.likely or (found.seconds, found.seconds)
            fits = target.gpu is None or _memory(at, batch, target)["fits"]
            rows.append({"batch": batch, "hardware": target.title, "kind": "cpu" if target.gpu is None else "gpu",
                         "per_sample_s": found.per_sample, "low_s": low / batch, "high_s": high / batch, "fits": fits})
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def _at_batch(description: families.Description, batch: int) -> families.Description | None:
    """The description at another batch, None where that input is past what a prediction takes."""
    try:
        return families.describe(description.family, {**description.values, "mode": description.mode,
                                                       "batch": batch})
    except ownmodel.ConfigError:
        return None


def crossovers(swept: pd.DataFrame) -> dict[str, int | None]:
    """Per GPU: the smallest batch of the sweep from which it is predicted faster per sample than the CPU and stays
    so at every larger batch that fits (None: never)."""
    cpu = swept[swept["kind"] == "cpu"].set_index("batch")["per_sample_s"]
    found = {}
    for title, part in swept[swept["kind"] == "gpu"].groupby("hardware", sort=False):
        part = part[part["fits"]]
        batch = costmodel.crossover(list(zip(part["batch"], cpu.reindex(part["batch"]), part["per_sample_s"])))
        found[title] = None if batch is None else int(batch)
    return found


def largest_fitting(swept: pd.DataFrame) -> dict[str, int | None]:
    """Per GPU: the largest batch of the sweep that fits its memory (None: none does)."""
    gpus = swept[swept["kind"] == "gpu"]
    return {title: (int(part[part["fits"]]["batch"].max()) if part["fits"].any() else None)
            for title, part in gpus.groupby("hardware", sort=False)}


def what_ifs(description: families.Description, gpu: hardware.Target) -> list[WhatIf]:
    """The eager call and each fix on one GPU, predicted per call at the batch described (the larger batch's per
    sample times the batch described, so that every bar is the same amount of work)."""
    bands, batch = uncertainty.load(), description.batch
    eager = census(description, batch, True)
    found = [WhatIf(EAGER, "the step as described, each operation dispatched and launched by the host",
                    timed(eager, gpu, batch, bands))]
    for name, rewrite, how in ((whatifs.GRAPH, whatifs.as_graph, _doc("a CUDA graph")),
                               (whatifs.FUSION, whatifs.fused, _doc("torch.compile's fusion")),
                               (whatifs.PINNED, whatifs.pinned, _doc("pinned memory"))):
        found.append(WhatIf(name, how, timed(rewrite(eager), gpu, batch, bands)))
    found.append(_half(eager, gpu, batch, bands))
    found.append(_larger(description, gpu, bands))
    return found


def _doc(start: str) -> str:
    """The model of a fix as core.model.whatifs' docstring states it (its bullet starting with `start`)."""
    bullets = whatifs.__doc__.split("\n- ")
    text = next(b for b in bullets if b.startswith(start))
    return " ".join(text.split()).rstrip(".") + "."


def _half(eager: dict, gpu: hardware.Target, batch: int, bands: list) -> WhatIf:
    how = _doc("mixed precision")
    half = whatifs.half_gpu(gpu.gpu)
    if half is None:
        return WhatIf(whatifs.HALF, how, None, f"the catalogue gives no float16 tensor-core peak for {gpu.gpu.title}")
    return WhatIf(whatifs.HALF, how, timed(whatifs.half_precision(eager), hardware.Target(gpu.host, half), batch, bands))


def _larger(description: families.Description, gpu: hardware.Target, bands: list) -> WhatIf:
    how = (f"the same step at {LARGER} times the batch (fewer calls for the same samples), per sample; each call's "
           f"fixed costs spread over more samples")
    batch = description.batch * LARGER
    larger = _at_batch(description, batch)
    if larger is None or not _memory(larger, batch, gpu)["fits"]:
        return WhatIf(LARGER_BATCH, how, None, f"a batch of {batch:,} is past the form's largest or does not fit "
                                               f"{gpu.gpu.title}'s memory")
    found = timed(census(larger, batch, True), gpu, batch, bands)
    share = description.batch / batch  # the same samples as one call described
    return WhatIf(LARGER_BATCH, how, Timed(found.hardware, found.device, description.batch, found.seconds * share,
                                           tuple(s * share for s in found.likely) if found.likely else None,
                                           found.regime, {k: v * share for k, v in found.parts.items()},
                                           found.gpu_idle * share, found.notes, found.band))


def what_matters(found: list[WhatIf]) -> str:
    """A sentence naming the fix that saves the most predicted time, and why, from the eager call's parts."""
    eager = found[0].timed
    fixes = [w for w in found[1:] if w.timed is not None]
    if not fixes:
        return "No fix is predicted for this GPU."
    best = min(fixes, key=lambda w: w.timed.seconds)
    saved = 1 - best.timed.seconds / eager.seconds
    host = sum(eager.parts.get(p, 0.0) for p in ("host", "launches")) / eager.seconds
    where = (f"the eager step is host-bound: the host's dispatch and launches are {host:.0%} of it, and the GPU idles "
             f"{eager.gpu_idle / eager.seconds:.0%} of the time" if eager.regime == "host-bound" else
             f"the eager step is device-bound: the GPU's work ({_share(eager, 'compute')} compute, "
             f"{_share(eager, 'copies')} copies) outweighs the host's {host:.0%}")
    if saved < 0.05:
        return f"No fix saves more than 5% of the predicted time: {where}."
    return (f"{best.name} matters most here, {saved:.0%} less predicted time per sample than eager, because {where}. "
            f"Differences within the model's error range may not hold on real hardware.")


def _share(found: Timed, part: str) -> str:
    return f"{found.parts.get(part, 0.0) / found.seconds:.0%}"


# -- a described model timed on this machine's CPU (the page's button: core.commands.jobs.start_model_check) ---------
CHECKS = ".your_models"  # under this machine's results folder: each timed description's file and report


def check_path(description: families.Description) -> Path:
    """Where the report of `description` timed on this machine goes (<digest>.json; its model file <digest>.py)."""
    digest = hashlib.sha256(json.dumps(families.to_query(description), sort_keys=True).encode()).hexdigest()[:16]
    return settings.results_dir() / devices.fingerprint()["machine_id"] / CHECKS / f"{digest}.json"


def measured(description: families.Description) -> dict | None:
    """This machine's CPU timing of `description` (its report entry: measured_s, measured_iqr_s, measured_blocks,
    calls_per_block, threads, measured_noisy, predicted_s), None where it was never timed here or its report
    cannot be read."""
    try:
        report = json.loads(files.read_regular_file(check_path(description))[0])["report"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(report, list):
        return None
    return next((entry for entry in report if isinstance(entry, dict) and "measured_s" in entry), None)
