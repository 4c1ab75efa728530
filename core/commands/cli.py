"""`python -m core`: the command line. Each command is a module of this package with `register(sub)`, which adds
its parser and its `run(args)`; this module builds the parser from them and turns the errors a user can cause into
one line and exit status 2."""
import argparse
import os
import sys

from core import devices, settings
from core.commands import calibrate, cancel, doctor, export, importing, info, listing, predict, report, run
from core.model import costmodel, hardware
from core.params import ConfigError, clip
from core.report import bundles
from core.store import files, runlock

COMMANDS = (info, listing, run, cancel, calibrate, predict, export, importing, report, doctor)


def main(argv: list[str] = None) -> int:
    args = parser().parse_args(argv)
    try:
        with hardware.telling_stand_ins(lambda note: print(f"note: {note}", file=sys.stderr, flush=True)):
            return args.command(args)
    except (runlock.BusyError, ConfigError, devices.DeviceError, settings.ReadOnlyError, hardware.HardwareError,
            costmodel.PredictionError, bundles.BundleError, files.StoreError) as e:
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


def parser() -> argparse.ArgumentParser:
    found = _Parser(prog="python -m core", description="Crossover, headless.")
    sub = found.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return found
