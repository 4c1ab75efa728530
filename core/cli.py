"""`python -m core info | list | run`: the headless entry point; the app's run button uses `run`."""
import argparse
import json
import os
import sys

from core import devices, experiments, runlock, runner, settings
from core.jobs import LOCK_FD_ENV
from core.params import ConfigError
from core.results import RecordWriter
from core.timing import call_text


def main(argv: list[str] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.command(args)
    except (ConfigError, devices.DeviceError, runlock.BusyError, settings.ReadOnlyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="Crossover, headless.")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="print this machine's fingerprint")
    info.set_defaults(command=cmd_info)
    listing = sub.add_parser("list", help="list experiments, their parameters, presets and variants")
    listing.set_defaults(command=cmd_list)
    run = sub.add_parser("run", help="run one experiment and write a results record")
    run.add_argument("experiment")
    run.add_argument("--device", action="append", help="a device (repeatable); default: every device here")
    run.add_argument("--preset", default="quick", help="smoke, quick (default) or paper")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    run.add_argument("--run-id", help=argparse.SUPPRESS)
    run.add_argument("--config-json", help=argparse.SUPPRESS)  # the app's jobs pass their checked configuration
    run.set_defaults(command=cmd_run)
    return parser


def cmd_info(args) -> int:
    print(json.dumps(devices.fingerprint(), indent=1))
    return 0


def cmd_list(args) -> int:
    for exp in experiments.registry().values():
        print(f"{exp.name}: {exp.title}")
        for p in exp.all_params():
            print(f"  --set {p.name}=...  {p.help} ({p.allowed()}; default {_show(p.default)})")
        for preset in exp.presets:
            print(f"  preset {preset}: " + ", ".join(f"{k}={_show(v)}" for k, v in exp.presets[preset].items()))
        for v in exp.variants:
            print(f"  variant '{v.name}' on {'/'.join(v.kinds)}: {v.help}")
    return 0


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def parse_overrides(exp, pairs: list[str]) -> dict:
    overrides = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep:
            raise ConfigError("--set", f"'{pair}' is not NAME=VALUE")
        overrides[name.strip()] = exp.param(name.strip()).parse(text)
    return overrides


def cmd_run(args) -> int:
    if settings.read_only():
        raise settings.ReadOnlyError()
    exp = experiments.get(args.experiment)
    overrides = _config_json(args.config_json) if args.config_json else {}
    config = exp.config(args.preset, overrides | parse_overrides(exp, args.set))
    names = [devices.check(d) for d in args.device] if args.device else devices.available()
    exp.plan(config, names)
    writer = RecordWriter(exp.name, args.preset, config, names, run_id=args.run_id)
    lock_fd = _hold_lock(writer, names)
    try:
        print(f"{exp.name} ({args.preset}) on {', '.join(names)} -> {writer.path}", flush=True)
        status = runner.run(exp, config, names, writer, progress=_print_progress)
        print(f"{status}: {writer.path}", flush=True)
    finally:
        os.close(lock_fd)
    return 0 if status == "complete" else 1


def _config_json(text: str) -> dict:
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError("--config-json", f"not JSON ({e})") from None
    if not isinstance(overrides, dict):
        raise ConfigError("--config-json", "must be a JSON object of NAME: VALUE")
    return overrides


def _hold_lock(writer: RecordWriter, names: list[str]) -> int:
    """The app's jobs hand the lock down already taken; a run from the shell takes it here."""
    inherited = os.environ.pop(LOCK_FD_ENV, None)
    if inherited:
        return int(inherited)
    r = writer.record
    return runlock.acquire({"run_id": r["run_id"], "experiment": r["experiment"], "devices": names,
                            "preset": r["preset"], "started": r["started"], "pid": os.getpid(),
                            "record": str(writer.path)})


def _print_progress(done: int, total: int, point, row: dict) -> None:
    if row["status"] != "ok":
        outcome = f"{row['status']}: {row.get('error')}"
    elif row.get("median") is not None:
        spread = f"IQR {row['iqr'] * 1e3:.2g} ms" if row["iqr"] is not None else "one sample"
        outcome = (f"median {row['median'] * 1e3:.4g} ms per {call_text(row['unit'], row['per_call'])} "
                   f"({spread}, n={row['n']}{', noisy' if row['noisy'] else ''})")
    else:
        outcome = "done"
    print(f"[{done}/{total}] {point.describe()}: {outcome}", flush=True)
