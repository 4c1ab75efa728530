"""What code made a record and in what environment: the git commit (with a dirty flag) when the app
runs from a checkout, else the package version; and the environment variables that change timings."""
import os
import platform
import subprocess
from functools import lru_cache

from core import __version__, settings

# glibc returns freed blocks of 64 kB and more to the system instead of growing the heap: without it the
# written Jacobian call's resident memory grows by gigabytes (see the jacobian experiment's about.md).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
RECORDED_ENV = ("MALLOC_MMAP_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


@lru_cache(maxsize=1)
def code_version() -> dict:
    """{"commit": sha, "dirty": bool} in a git checkout; {"package": version} otherwise."""
    try:
        commit = _git("rev-parse", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"package": __version__}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=settings.APP_ROOT, capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


def environment() -> dict:
    return {name: os.environ.get(name) for name in RECORDED_ENV}


def run_environment() -> dict:
    """The environment a run's process should start with: on glibc, the malloc setting above (kept when
    the user chose one)."""
    env = dict(os.environ)
    if platform.libc_ver()[0] == "glibc":
        env = MALLOC_ENV | env
    return env
