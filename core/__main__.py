import os
import sys

from core import experiments, versions
from core.commands.cli import main

if sys.argv[1:2] == ["run"] and len(sys.argv) > 2 and sys.argv[2] in experiments.registry():
    env = versions.run_environment(experiments.get(sys.argv[2]).malloc_mmap_threshold)
    if env != dict(os.environ):  # glibc reads its malloc settings once, at start: restart with them
        os.execve(sys.executable, [sys.executable, "-m", "core", *sys.argv[1:]], env)
sys.exit(main())
