"""The experiment registry: every module in this package that defines `EXPERIMENT`."""
import importlib
import pkgutil
from functools import lru_cache

from core.experiments.base import Experiment
from core.params import ConfigError


@lru_cache(maxsize=1)
def registry() -> dict[str, Experiment]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if isinstance(getattr(module, "EXPERIMENT", None), Experiment):
            found.append(module.EXPERIMENT)
    return {e.name: e for e in sorted(found, key=lambda e: (e.order, e.name))}


def get(name: str) -> Experiment:
    experiments = registry()
    if name not in experiments:
        raise ConfigError("experiment", f"'{name}' is unknown; known: {', '.join(experiments)}")
    return experiments[name]
