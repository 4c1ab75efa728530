"""What every experiment declares (parameters, presets, variants) and the points it measures."""
from dataclasses import dataclass, field
from typing import Any

from core import devices
from core.params import ConfigError, Param

PRESETS = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class Variant:
    """One way of doing the work; `kinds` lists the device kinds it runs on."""
    name: str
    help: str
    kinds: tuple[str, ...] = ("cpu", "cuda", "mps")


@dataclass(frozen=True)
class Point:
    """One measurement to take: a device, a variant and the swept parameters."""
    device: str
    variant: str
    params: dict = field(default_factory=dict)

    def describe(self) -> str:
        swept = " ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.device} {self.variant} {swept}".strip()


class SkipPoint(Exception):
    """Raised by `measure` to record a point as skipped (with why, and any estimates) instead of
    running it."""
    def __init__(self, reason: str, **metrics):
        super().__init__(reason)
        self.metrics = metrics


class Experiment:
    """Subclasses set the class attributes and implement `points` and `measure`."""
    name: str
    title: str
    order: int = 100
    source: str = ""        # the write-up it reproduces (a file in shared/seeds)
    claim: str = ""         # the write-up's claim, one sentence
    summary: str = ""       # what we measure, one paragraph
    params: tuple[Param, ...] = ()
    presets: dict[str, dict] = {}
    variants: tuple[Variant, ...] = ()

    # -- configuration -------------------------------------------------------------------------
    def all_params(self) -> tuple[Param, ...]:
        names = tuple(v.name for v in self.variants)
        return self.params + (Param("variants", str, names, "which variants to run", choices=names, many=True),)

    def param(self, name: str) -> Param:
        for p in self.all_params():
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.all_params())
        raise ConfigError(name, f"unknown parameter for {self.name}; known: {known}")

    def config(self, preset: str = "quick", overrides: dict[str, Any] = None) -> dict:
        """The preset's values with `overrides` applied, each checked; raises ConfigError."""
        if preset not in PRESETS:
            raise ConfigError("preset", f"'{preset}' is not one of {', '.join(PRESETS)}")
        values = {p.name: p.default for p in self.all_params()} | self.presets.get(preset, {})
        for name, value in (overrides or {}).items():
            values[name] = value
            self.param(name)
        checked = {p.name: p.check(values[p.name]) for p in self.all_params()}
        self.validate(checked)
        return checked

    def validate(self, config: dict) -> None:
        """Cross-field checks; raise ConfigError naming the field."""

    # -- planning and measuring ----------------------------------------------------------------
    def variants_for(self, config: dict, device: str) -> list[Variant]:
        kind = devices.kind(device)
        return [v for v in self.variants if v.name in config["variants"] and kind in v.kinds]

    def points(self, config: dict, device: str) -> list[Point]:
        raise NotImplementedError

    def measure(self, point: Point, config: dict) -> dict:
        """Measure one point. Returns {"timing": Measurement.to_dict(), "metrics": {...}}; either
        may be absent. Raise SkipPoint to skip it with a reason."""
        raise NotImplementedError

    def estimate_seconds(self, config: dict, device: str) -> float:
        """A rough guess of the run's wall time on this device, shown before a run as an estimate."""
        return 5.0 * len(self.points(config, device))
