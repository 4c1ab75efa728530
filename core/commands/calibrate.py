"""`python -m core calibrate`: this machine's constants measured into its calibrated profile (core.calibration); the
app's "Calibrate this machine" runs it as a background job (core.commands.jobs.start_calibration)."""
import os
import signal
import sys

from core import settings
from core.calibration import calibrate
from core.model import profiles
from core.store import files, runlock


def register(sub) -> None:
    parser = sub.add_parser("calibrate", help="measure this machine's constants into its calibrated profile")
    parser.add_argument("--device", action="append",
                        help="a CUDA GPU to calibrate besides the CPU (repeatable); default: every device here")
    parser.add_argument("--quick", action="store_true", help="a few seconds, rougher figures (for tests)")
    parser.set_defaults(command=run)


def run(args) -> int:
    settings.require_writable("calibration")
    names = calibrate.devices_to_calibrate(args.device)
    inherited = os.environ.pop(runlock.LOCK_FD_ENV, None)  # the app's job took the run lock for this calibration
    busy = runlock.holder()
    if busy is not None and not inherited:  # a run's work would skew the measurements, and they its timings
        raise runlock.BusyError(busy)
    if not inherited:
        return _calibrated(args, names)
    lock = runlock.adopt(inherited, busy or {})
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the app's cancel: as Ctrl-C, nothing saved
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the app's job starts it held back
    try:
        return _calibrated(args, names)
    finally:
        runlock.release(lock)


def _calibrated(args, names: list[str]) -> int:
    profile = calibrate.take(names, quick=args.quick)
    try:
        path, broken = profiles.save(profile), None  # before the report: minutes of measuring outlive a display fault
    except profiles.ProfileError as e:
        path, broken = None, e
    except files.StoreError as e:  # a full disk, a read-only folder: the figures are shown, then the error line
        print(calibrate.report(profile))
        raise e.followed_by("the measurements above are not saved: free some space (or make the folder writable) "
                            "and run `python -m core calibrate` again") from e
    print(calibrate.report(profile))
    if broken:
        print(f"error: the measurement looks broken, profile not written: {broken}. Other work during the calibration "
              f"usually does this (the note above says how busy the machine was, where it was): run `python -m core "
              f"calibrate` again when the machine is idle", file=sys.stderr)
        return 1
    print(f"calibrated {', '.join(names)} in {profile['seconds']:.0f} s: {path}")
    return 0
