"""`python -m core`: the command line. Each command is a module of this package with `register(sub)`, which adds
its parser and its `run(args)`; this module builds the parser from them and turns the errors a user can cause into
one line and exit status 2."""
import argparse
import importlib
import os
import sys

from core import devices, settings
from core.model import costmodel, hardware
from core.params import ConfigError, clip
from core.store import files, runlock

# Each command and its module, imported only when asked for (or when every command's help is): a command's start-up
# pays for its own imports only (`calibrate --quick` is seconds of measuring; the experiments' charts take more)
COMMANDS = {"info": "info", "list": "listing", "run": "run", "cancel": "cancel", "calibrate": "calibrate",
            "predict": "predict", "export": "export", "import": "importing", "report": "report", "doctor": "doctor"}


def main(argv: list[str] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    modules = commands(argv[:1])
    args = parser(modules).parse_args(argv)
    try:
        with hardware.telling_stand_ins(lambda note: print(f"note: {note}", file=sys.stderr, flush=True)):
            return args.command(args)
    except (runlock.BusyError, ConfigError, devices.DeviceError, settings.ReadOnlyError, hardware.HardwareError,
            costmodel.PredictionError, files.StoreError, *(e for m in modules for e in getattr(m, "ERRORS", ()))) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`python -m core list | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:  # Ctrl-C; a run has kept its finished points and said so before it gets here
        print("\ninterrupted", file=sys.stderr)
        return 130


class _Parser(argparse.ArgumentParser):
    """argparse's own errors ("unrecognized arguments: ...") echo what was typed: each word clipped."""

    def error(self, message: str):
        super().error(" ".join(clip(word) for word in message.split(" ")))


def commands(first: list[str] = ()) -> list:
    """The module of the command named by `first` (the command line's first word) alone, else every command's. A
    module's ERRORS are the errors of its own a user can cause, said in one line like the others."""
    names = [first[0]] if first and first[0] in COMMANDS else COMMANDS
    return [importlib.import_module(f"core.commands.{COMMANDS[name]}") for name in names]


def parser(modules: list = None) -> argparse.ArgumentParser:
    found = _Parser(prog="python -m core", description="Crossover, headless.")
    sub = found.add_subparsers(required=True, metavar="COMMAND")
    for module in modules or commands():
        module.register(sub)
    return found
