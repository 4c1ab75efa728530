"""Where results live and whether this instance may start runs, read from the environment."""
import os
from pathlib import Path

APP_ROOT = Path(__file__).resolve().parent.parent
RESULTS_ENV = "CROSSOVER_RESULTS_DIR"
READ_ONLY_ENV = "CROSSOVER_READ_ONLY"


def results_dir() -> Path:
    """`results/` beside the app, unless CROSSOVER_RESULTS_DIR names another folder."""
    return Path(os.environ.get(RESULTS_ENV) or APP_ROOT / "results").resolve()


def read_only() -> bool:
    """True when CROSSOVER_READ_ONLY is set to anything but '', '0', 'false' or 'no'."""
    return os.environ.get(READ_ONLY_ENV, "").strip().lower() not in ("", "0", "false", "no")


def this_host() -> str:
    """What the app calls the computer it runs on: a visitor of a read-only view is not on it."""
    return "this server" if read_only() else "this machine"


class ReadOnlyError(RuntimeError):
    def __init__(self, action: str = "runs"):
        super().__init__(f"this Crossover instance is read-only ({READ_ONLY_ENV} is set): {action} refused")


def require_writable(action: str = "runs") -> None:
    """Raise ReadOnlyError naming `action` when this instance is read-only: every path that writes or
    stops anything calls it first."""
    if read_only():
        raise ReadOnlyError(action)
