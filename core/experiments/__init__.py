"""The experiment registry: every package beside this module that defines `EXPERIMENT`, plus the
modules named in CROSSOVER_EXPERIMENTS (comma-separated, importable), for experiments kept elsewhere.
A package that fails to import is kept out and listed by `broken()`, so one broken experiment cannot
take the others (or the app) down; the overview shows it."""
import importlib
import os
import pkgutil
import traceback
from functools import lru_cache

from core.measure.experiment import Experiment
from core.params import ConfigError

EXTRA_ENV = "CROSSOVER_EXPERIMENTS"


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, Experiment], dict[str, str]]:
    names = [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__) if info.ispkg]
    names += [n.strip() for n in os.environ.get(EXTRA_ENV, "").split(",") if n.strip()]
    found, broken = [], {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any import error: report it, keep the others
            broken[name] = "".join(traceback.format_exception_only(e)).strip()
            continue
        if isinstance(getattr(module, "EXPERIMENT", None), Experiment):
            found.append(module.EXPERIMENT)
        else:
            broken[name] = "defines no EXPERIMENT (an Experiment instance)"
    return {e.name: e for e in sorted(found, key=lambda e: (e.order, e.name))}, broken


def registry() -> dict[str, Experiment]:
    return _load()[0]


def broken() -> dict[str, str]:
    """Experiment modules that could not be loaded, with why."""
    return _load()[1]


def reload() -> None:
    """Discover the experiments again (after CROSSOVER_EXPERIMENTS changed, say)."""
    _load.cache_clear()


def get(name: str) -> Experiment:
    experiments = registry()
    if name not in experiments:
        raise ConfigError("experiment", f"'{name}' is unknown; known: {', '.join(experiments)}")
    return experiments[name]
