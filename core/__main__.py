import gc
import os
import sys

from core.commands.cli import main

if sys.argv[1:2] == ["run"] and len(sys.argv) > 2:
    from core import experiments, versions
    from core.params import ConfigError
    try:
        threshold = experiments.get(sys.argv[2]).malloc_mmap_threshold
    except ConfigError:  # an unknown experiment: main() says so
        threshold = None
    env = versions.run_environment(threshold)
    if env != dict(os.environ):  # glibc reads its malloc settings once, at start: restart with them
        os.execve(sys.executable, [sys.executable, "-m", "core", *sys.argv[1:]], env)
try:
    sys.exit(main())
finally:  # the interpreter's exit collects every object torch's imports made, 1-1.5 s here: the process is done
    gc.freeze()
