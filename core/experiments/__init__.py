"""The experiment registry: every package beside this module that defines `EXPERIMENT`, plus the
modules named in CROSSOVER_EXPERIMENTS (comma-separated, importable), for experiments kept elsewhere.
A package that fails to import is kept out and listed by `broken()`, so one broken experiment cannot
take the others (or the app) down; the overview shows it.

The registry is lazy: `get(name)` imports only that experiment's package where one bears its name, and
`registry()` imports them all the first time it is asked. It may import anything in core; nothing in core
below it (store, measure, model, calibration, present, predict) imports it."""
import importlib
import os
import pkgutil
import traceback
from functools import lru_cache

from core.params import ConfigError
from core.present import charts
from core.present.presented import Presented

EXTRA_ENV = "CROSSOVER_EXPERIMENTS"


def _package_names() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(__path__) if info.ispkg]


@lru_cache(maxsize=None)
def _imported(module_name: str) -> Presented | str:
    """The module's EXPERIMENT, or why there is none."""
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import error: report it, keep the others
        return "".join(traceback.format_exception_only(e)).strip()
    found = getattr(module, "EXPERIMENT", None)
    return found if isinstance(found, Presented) else "defines no EXPERIMENT (a core.present.presented.Presented)"


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, Presented], dict[str, str]]:
    names = [f"{__name__}.{name}" for name in _package_names()]
    names += [n.strip() for n in os.environ.get(EXTRA_ENV, "").split(",") if n.strip()]
    loaded = {name: _imported(name) for name in names}
    found = [e for e in loaded.values() if isinstance(e, Presented)]
    broken = {name: why for name, why in loaded.items() if isinstance(why, str)}
    return {e.name: e for e in sorted(found, key=lambda e: (e.order, e.name))}, broken


def registry() -> dict[str, Presented]:
    return _load()[0]


def broken() -> dict[str, str]:
    """Experiment modules that could not be loaded, with why."""
    return _load()[1]


def reload() -> None:
    """Discover the experiments again (after CROSSOVER_EXPERIMENTS changed, say)."""
    _load.cache_clear()
    _imported.cache_clear()


def get(name: str) -> Presented:
    """The experiment called `name`: its own package alone where one bears the name, else the whole registry."""
    if name in _package_names():
        found = _imported(f"{__name__}.{name}")
        if isinstance(found, Presented) and found.name == name:
            return found
    experiments = registry()
    if name not in experiments:
        raise ConfigError("experiment", f"'{name}' is unknown; known: {', '.join(experiments)}")
    return experiments[name]


def _variant_names():
    return (v.name for e in registry().values() for v in e.variants)


charts.declare_variants(_variant_names)
