"""What code made a record and in what environment: the git commit (with a dirty flag) when the app
runs from a checkout, else the package version; and the environment variables that change timings."""
import os
import platform
import subprocess
from functools import lru_cache

from core import __version__, settings

MALLOC_ENV = "MALLOC_MMAP_THRESHOLD_"
GLIBC = platform.libc_ver()[0] == "glibc"
RECORDED_ENV = ("MALLOC_MMAP_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


@lru_cache(maxsize=1)
def code_version() -> dict:
    """{"commit": sha, "dirty": bool} in a git checkout; {"package": version} otherwise."""
    try:
        commit = _git("rev-parse", "HEAD")
        # results/ is data the code wrote, not code: a retaken record or table there leaves the code clean
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"))
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"package": __version__}


def code_text(code: dict) -> str:
    """A code version in a few characters: the commit (and whether it had uncommitted changes), else the package."""
    if code.get("commit"):
        return code["commit"][:10] + (" (uncommitted changes)" if code.get("dirty") else "")
    return f"package {code.get('package', 'unknown')}"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=settings.APP_ROOT, capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


def environment() -> dict:
    return {name: os.environ.get(name) for name in RECORDED_ENV}


def run_environment(mmap_threshold: int | None) -> dict:
    """The environment a run's process should start with: on glibc, an experiment's malloc mmap threshold
    (glibc reads it once, at start; a value the user set wins). Only experiments that ask for it get it:
    it makes every allocation above the threshold a fresh mapping, which slows allocation-heavy loops."""
    env = dict(os.environ)
    if mmap_threshold and GLIBC:
        env.setdefault(MALLOC_ENV, str(mmap_threshold))
    return env
