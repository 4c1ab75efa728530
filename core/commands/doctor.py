"""`python -m core doctor`: within a time budget, what this machine can tell: a plan first, then the calibration and
each experiment's same-host points (core.doctor), the checks, every claim's verdict here, the cost model's accuracy
here, and a bundle to import anywhere. Run again, it does what the last one left."""
import os
import signal
import sys
from pathlib import Path

from core import devices, settings
from core.commands.run import chosen_devices
from core.doctor import plan as planning, session
from core.model import profiles
from core.params import file_path
from core.report import overview
from core.store import results, runlock


def register(sub) -> None:
    parser = sub.add_parser("doctor", help="spend a time budget measuring what this machine can tell, check it, "
                                           "and leave a bundle")
    parser.add_argument("--budget", default="10m", help="how long it may take: 90s, 3m, 1.5h (default 10m)")
    parser.add_argument("--device", action="append", help="a device (repeatable); default: every device here")
    parser.add_argument("-o", "--output", metavar="FILE", help="the bundle (default: doctor-MACHINE.tar.gz here)")
    parser.add_argument("--again", action="store_true", help="start afresh, not from what the last doctor left")
    parser.set_defaults(command=run)


def run(args) -> int:
    settings.require_writable("the doctor")
    budget = planning.parse_budget(args.budget)
    names = chosen_devices(args.device)
    machine = devices.fingerprint()["machine_id"]
    output = Path(file_path(args.output, "--output")) if args.output else Path(f"doctor-{machine}.tar.gz")
    busy = runlock.holder()
    if busy is not None and not os.environ.get(runlock.LOCK_FD_ENV):  # the app's job holds it for us
        raise runlock.BusyError(busy)
    if args.again:
        session.forget()
    the_plan = planning.make(budget, names, set(session.done_steps()), profile=profiles.load())
    print(the_plan.text(), flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the app's cancel: as Ctrl-C, finished steps kept
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the app's job starts it held back
    inherited = os.environ.pop(runlock.LOCK_FD_ENV, None)
    outcome = session.run(the_plan, output, say=lambda line: print(line, flush=True), inherited=inherited)
    records = results.load_records()  # once, for the verdicts and the accuracy
    print("-- verdicts on this machine")
    for name, verdict in overview.verdicts_here(records):
        print(f"  {name}: {overview.verdict_line(verdict)}")
    print("-- the cost model, predicted against measured here")
    for line in session.accuracy_here(records):
        print(f"  {line}")
    print(f"bundle: {outcome['bundle']} (python -m core import {outcome['bundle']} on any Crossover)"
          if outcome["bundle"] else "bundle: none written (nothing of this machine's to bundle yet, or the disk refused it: see above)")
    if outcome["cut"]:
        print("interrupted: what finished is kept; run `python -m core doctor` again to do the rest", file=sys.stderr)
        return 130
    return 0
