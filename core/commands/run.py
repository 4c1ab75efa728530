"""`python -m core run NAME`: one experiment's points measured into a results record, a line per point, under
the run lock; the app's jobs start the same command with their checked configuration (--config-json)."""
import argparse
import json
import os

from core import devices, experiments, settings
from core.commands.progress import progress_bar
from core.measure import runner
from core.params import ConfigError, clip, shown
from core.report import overview
from core.store import files, results, runlock


def register(sub) -> None:
    parser = sub.add_parser("run", help="run one experiment and write a results record")
    parser.add_argument("experiment")
    parser.add_argument("--device", action="append", help="a device (repeatable); default: every device here")
    parser.add_argument("--preset", default="quick", help="smoke, quick (default) or paper")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)  # the app's jobs pass their checked configuration
    parser.set_defaults(command=run)


def run(args) -> int:
    if settings.read_only():
        raise settings.ReadOnlyError()
    exp = experiments.get(clip(args.experiment))  # clipped: a long name is unknown anyway, and echoed
    given = _config_json(args.config_json) if args.config_json else {}
    typed = parse_overrides(exp, args.set)
    both = sorted(given.keys() & typed.keys())
    if both:
        raise ConfigError(both[0], "given both in --config-json and with --set; allowed: one of them")
    config = exp.config(args.preset, given | typed)
    names = chosen_devices(args.device)
    planned = len(exp.plan(config, names))
    writer = results.RecordWriter(exp.name, args.preset, config, names, run_id=args.run_id)
    with files.said(runlock.paths()[1]):  # a full disk or a read-only folder, in words
        lock_fd = _hold_lock(writer, names)
    try:
        print(f"{exp.name} ({args.preset}) on {', '.join(names)} -> {writer.path}", flush=True)
        with progress_bar(f"{exp.name} ({args.preset})", planned) as bar:
            status = runner.run(exp, config, names, writer, progress=bar.finished, standin_progress=bar.standin,
                                starting=bar.starting)
        print(f"{status}: {writer.path}", flush=True)
    finally:
        runlock.release(lock_fd)
    print(f"Verdicts on {settings.this_host()} (its latest complete runs):", flush=True)
    for _, verdict in overview.verdicts_here(results.load_records(), [exp.name]):
        print(f"- {overview.verdict_line(verdict)}", flush=True)
    return 0 if status == "complete" else 1


def parse_overrides(exp, pairs: list[str]) -> dict:
    """`--set NAME=VALUE` pairs, each checked; a parameter set twice is refused, not silently overridden."""
    overrides = {}
    for pair in pairs:
        name, sep, text = (part.strip() for part in pair.partition("="))
        if not sep or not name:
            raise ConfigError("--set", f"{shown(pair)} is not NAME=VALUE")
        if name in overrides:
            raise ConfigError(name, f"given twice with --set; allowed: one --set {clip(name)}=... per run")
        overrides[name] = exp.param(name).parse(text)
    return overrides


def chosen_devices(given: list[str] | None) -> list[str]:
    """The devices named (each once, in the order first given), or every device here."""
    if not given:
        return devices.available()
    return list(dict.fromkeys(devices.check(clip(d)) for d in given))


def _config_json(text: str) -> dict:
    try:
        overrides = json.loads(text, object_pairs_hook=_refuse_repeated_keys)
    except ConfigError:
        raise
    except (ValueError, RecursionError) as e:  # JSONDecodeError, an int past the digit limit, deep nesting
        raise ConfigError("--config-json", f"not JSON ({e})") from None
    if not isinstance(overrides, dict):
        raise ConfigError("--config-json", "must be a JSON object of NAME: VALUE")
    return overrides


def _refuse_repeated_keys(pairs: list[tuple]) -> dict:
    """json.loads keeps the last of a repeated key silently; refuse it instead."""
    found = {}
    for name, value in pairs:
        if name in found:
            raise ConfigError("--config-json", f"{shown(name)} is given twice; allowed: each name once")
        found[name] = value
    return found


def _hold_lock(writer: results.RecordWriter, names: list[str]) -> int:
    """The app's jobs hand the lock down already taken (checked: a descriptor that does not hold it is
    refused); a run from the shell takes it here."""
    r = writer.record
    info = {"run_id": r["run_id"], "experiment": r["experiment"], "devices": names, "preset": r["preset"],
            "started": r["started"], "pid": os.getpid(), "record": str(writer.path)}
    inherited = os.environ.pop(runlock.LOCK_FD_ENV, None)
    return runlock.adopt(inherited, info) if inherited else runlock.acquire(info)
