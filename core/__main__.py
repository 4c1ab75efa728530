import os
import sys

from core import versions
from core.cli import main

if sys.argv[1:2] == ["run"] and versions.run_environment() != dict(os.environ):
    # glibc reads its malloc settings once, at start: a run restarts itself with them
    os.execve(sys.executable, [sys.executable, "-m", "core", *sys.argv[1:]], versions.run_environment())
sys.exit(main())
