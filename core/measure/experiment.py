"""The experiment contract: what every experiment declares (parameters, presets, variants), the points it
measures and the workload of each point. What its page shows (claims, tables, charts, prose) is
core.present.presented's; an experiment's package (core/experiments/<name>/) binds the two."""
from dataclasses import dataclass, field, replace
from typing import Any

from core import devices
from core.measure import timing
from core.params import PRESETS, ConfigError, Param, shown
from core.store.record_schema import DEFAULT_THREADS

CORES, MAX_THREADS = "cores", 1024
CPU_THREADS = Param("cpu_threads", str, (DEFAULT_THREADS,), "intra-op thread settings each CPU point is timed at: "
                    f"{DEFAULT_THREADS} (torch's, as the write-ups ran), {CORES} (the physical cores) or a number of "
                    "threads; a verdict compares a GPU with the first and with the fastest", many=True)
PRECISION = Param("precision", float, 0.0, "time each point until its median's 95% interval is within this share "
                  "of it (at least 5 samples; its budget permitting); 0: the experiment's repeats alone", low=0.0, high=1.0)
# An expert's CPU baseline beside the write-up's (one thread, the physical cores, torch's default), and medians
# known to 5%, wherever a run is not a test's smoke run.
GENERIC_PRESETS = {preset: {CPU_THREADS.name: ("default", "1", "cores"), PRECISION.name: 0.05}
                   for preset in ("quick", "paper")}


@dataclass(frozen=True)
class Variant:
    """One way of doing the work; `kinds` lists the device kinds it runs on."""
    name: str
    help: str
    kinds: tuple[str, ...] = ("cpu", "cuda", "mps")


@dataclass(frozen=True)
class Point:
    """One measurement to take: a device, a variant and the swept parameters; on the CPU, the intra-op
    `threads` it is timed at (None: torch's, as they are) and the setting they came from."""
    device: str
    variant: str
    params: dict = field(default_factory=dict)
    threads: int | None = None
    threads_setting: str = DEFAULT_THREADS

    def describe(self) -> str:
        swept = " ".join(f"{k}={v}" for k, v in self.params.items())
        threads = f" threads={self.threads}" if self.threads_setting != DEFAULT_THREADS else ""
        return f"{self.device} {self.variant} {swept}{threads}".strip()


def thread_counts(settings: tuple[str, ...]) -> dict[str, int]:
    """Each CPU thread setting's intra-op thread count, a count measured once: 'default' (torch's, which the
    write-ups ran), 'cores' (the physical cores) or a number; 'default' is kept where another gives its count."""
    machine = devices.fingerprint()
    named = {DEFAULT_THREADS: machine["torch_threads"], CORES: machine.get("cpu_physical_cores") or machine["torch_threads"]}
    counts: dict[str, int] = {}
    for setting in sorted(settings, key=lambda s: s != DEFAULT_THREADS):
        count = named.get(setting) or int(setting)
        if count not in counts.values():
            counts[setting] = count
    return counts


def check_thread_settings(settings: tuple[str, ...]) -> None:
    for setting in settings:
        if setting not in (DEFAULT_THREADS, CORES) and not (setting.isdigit() and 1 <= int(setting) <= MAX_THREADS):
            raise ConfigError("cpu_threads", f"{shown(setting)} is not a thread setting; allowed: {DEFAULT_THREADS} "
                                             f"(torch's), {CORES} (the physical cores) or a whole number from 1 to "
                                             f"{MAX_THREADS}")


class SkipPoint(Exception):
    """Raised while building a workload to record the point as skipped (with why, and any
    estimates) instead of running it."""
    def __init__(self, reason: str, **metrics):
        super().__init__(reason)
        self.metrics = metrics


# -- the memory guard: a point estimated not to fit is skipped before it allocates ----------------------
MEMORY_FRACTION = Param("memory_fraction", float, 0.5, "share of the free memory a point may use (its "
                        "device's, and the host's for what is built there): a point estimated to need more "
                        "is skipped", low=0.05, high=1.0)
LAST_DATA = "last data"  # RunState.memo: the key of the data set the run's last point built


def check_memory(device: str, fraction: float, device_bytes: float, host_bytes: float = 0.0,
                 recorded: dict | None = None) -> dict:
    """A point's estimated peak bytes beside the free memory, as metrics: `estimated_bytes` and `free_bytes`
    on its device (on the CPU the host's bytes count there too) and, on a GPU that needs host memory as well,
    `estimated_host_bytes` and `free_host_bytes`. Raises SkipPoint with them (and `recorded`) when a need
    exceeds `fraction` of what is free."""
    apart = devices.is_accelerator(device) and host_bytes > 0
    needs = [(device, device_bytes + (0.0 if apart else host_bytes), "")]
    if apart:
        needs.append(("cpu", host_bytes, "host_"))
    metrics = {}
    for where, need, prefix in needs:
        metrics |= {f"estimated_{prefix}bytes": float(need), f"free_{prefix}bytes": devices.free_memory(where)}
    for where, need, prefix in needs:
        free = metrics[f"free_{prefix}bytes"]
        if need > fraction * free:
            raise SkipPoint(f"needs about {need / 1e9:.3g} GB{' of host memory' if prefix else ''}; {where} has "
                            f"{free / 1e9:.3g} GB free and a point may use {fraction:.0%} of it (memory_fraction)",
                            **metrics, **(recorded or {}))
    return metrics


def data_resident(run: "RunState", key) -> bool:
    """Whether the run's last point built this data set: the experiments' lru caches keep at least the latest
    one, so it is already held (out of the free memory) and needs no room again."""
    return run.memo.get(LAST_DATA) == key


class RunState:
    """What the points of one run share, and nothing outlives: the rows measured so far, a scratch
    dict for the experiment (calibrations, references), and the runner's timer for probes."""

    def __init__(self):
        self.rows: list[dict] = []
        self.memo: dict = {}

    @staticmethod
    def time(workload: timing.Workload, device: str) -> timing.Measurement:
        return timing.run(workload, device)


class Experiment:
    """Subclasses set the class attributes and implement `points` and `workload`."""
    name: str
    title: str
    order: int = 100
    source: str = ""        # the write-up it reproduces: its id in core/published.json's `sources`
    params: tuple[Param, ...] = ()
    presets: dict[str, dict] = {}
    variants: tuple[Variant, ...] = ()
    # The unit of each metric that is a time or a rate of the work one sample holds ("s", "µs", "GFLOP/s"): a
    # predicted point scales it with its predicted time (core.predict.predictions.with_twin_metrics)
    metric_units: dict[str, str] = {}
    unpredicted_metrics: tuple[str, ...] = ()  # times of start-up or warm-up: one warm sample's prediction says nothing
    malloc_mmap_threshold: int | None = None  # glibc: bytes from which a run maps (and unmaps) its allocations
    samples_to_precision = True  # its points take samples until precise; False: a call's own epochs are its samples

    # -- configuration -------------------------------------------------------------------------
    def all_params(self) -> tuple[Param, ...]:
        names = tuple(v.name for v in self.variants)
        return self.params + (CPU_THREADS, PRECISION, Param("variants", str, names, "which variants to run", choices=names,
                                                 many=True))

    def param(self, name: str) -> Param:
        for p in self.all_params():
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.all_params())
        raise ConfigError(name, f"unknown parameter for {self.name}; known: {known}")

    def config(self, preset: str = "quick", overrides: dict[str, Any] = None) -> dict:
        """The preset's values with `overrides` applied, each checked; raises ConfigError."""
        if preset not in PRESETS:
            raise ConfigError("preset", f"{shown(preset)} is not one of {', '.join(PRESETS)}")
        values = ({p.name: p.default for p in self.all_params()} | GENERIC_PRESETS.get(preset, {})
                  | self.presets.get(preset, {}))
        for name, value in (overrides or {}).items():
            self.param(name)
            values[name] = value
        checked = {p.name: p.check(values[p.name]) for p in self.all_params()}
        check_thread_settings(checked[CPU_THREADS.name])
        self.validate(checked)
        return checked

    def validate(self, config: dict) -> None:
        """Cross-field checks; raise ConfigError naming the field."""

    # -- planning and measuring ----------------------------------------------------------------
    def variants_for(self, config: dict, device: str) -> list[Variant]:
        kind = devices.plays(device)  # the stand-in plans a GPU's variants
        return [v for v in self.variants if v.name in config["variants"] and kind in v.kinds]

    def points(self, config: dict, device: str) -> list[Point]:
        raise NotImplementedError

    def plan(self, config: dict, device_names: list[str]) -> list[Point]:
        """Every point on every device, a CPU point once per thread setting (core.measure.experiment.thread_counts);
        ConfigError when the chosen variants leave none."""
        points = [p for d in device_names for p in self.at_thread_settings(self.points(config, d), config)]
        if points:
            return points
        cannot = "; ".join(f"{d} cannot run {', '.join(config['variants'])} (it runs "
                           f"{', '.join(v.name for v in self.variants if devices.plays(d) in v.kinds) or 'nothing'})"
                           for d in device_names)
        raise ConfigError("variants", f"no point to measure: {cannot}")

    @staticmethod
    def at_thread_settings(points: list[Point], config: dict) -> list[Point]:
        """Each CPU point at each thread setting, the default first; other devices' points as they are."""
        counts = thread_counts(config.get(CPU_THREADS.name, CPU_THREADS.default))
        return [replace(p, threads=count if setting != DEFAULT_THREADS else None, threads_setting=setting)
                for p in points for setting, count in (counts.items() if devices.kind(p.device) == "cpu"
                                                      else [(DEFAULT_THREADS, None)])]

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        """The work of one point, for the runner to time. Raise SkipPoint to skip it with a reason."""
        raise NotImplementedError

    def estimate_seconds(self, config: dict, device: str) -> float:
        """A rough guess of the run's wall time on this device, shown before a run as an estimate."""
        return 5.0 * len(self.points(config, device))

    def run_estimate(self, config: dict, device: str) -> float:
        """estimate_seconds with each thread setting of a CPU (every setting is a run of the points again) and, timed
        to a precision, at least MIN_SAMPLES samples where the experiment's repeats (or epochs) are fewer, and the
        samples a noisy point takes beyond them (a run on a busy machine takes them all: the estimate's upper end)."""
        settings = len(thread_counts(config.get(CPU_THREADS.name, CPU_THREADS.default))) if devices.kind(device) == "cpu" else 1
        repeats = config.get("repeats", config.get("epochs"))
        more = 1.0
        if config.get(PRECISION.name):  # at least MIN_SAMPLES; a noisy point goes on for up to EXTRA_TIME times as long
            more = max(1.0, timing.MIN_SAMPLES / repeats if repeats else 1.0) * (
                1 + timing.EXTRA_TIME if self.samples_to_precision else 1)
        return settings * more * self.estimate_seconds(config, device)
