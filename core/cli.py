"""`python -m core info | list | run`: the headless entry point; the app's run button uses `run`."""
import argparse
import json
import os
import sys

from tqdm import tqdm

from core import (breakdown, calibrate, census, costmodel, devices, experiments, hardware, ownmodel, predictions,
                  profiles, results, runlock, runner, settings, writeups)
from core.params import ConfigError, clip, shown
from core.timing import call_text


def main(argv: list[str] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.command(args)
    except (ConfigError, devices.DeviceError, runlock.BusyError, settings.ReadOnlyError, hardware.HardwareError,
            costmodel.PredictionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """argparse's own errors ("unrecognized arguments: ...") echo what was typed: each word clipped."""

    def error(self, message: str):
        super().error(" ".join(clip(word) for word in message.split(" ")))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m core", description="Crossover, headless.")
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
    calibrate = sub.add_parser("calibrate", help="measure this machine's constants into its calibrated profile")
    calibrate.add_argument("--device", action="append",
                           help="a CUDA GPU to calibrate besides the CPU (repeatable); default: every device here")
    calibrate.add_argument("--quick", action="store_true", help="a few seconds, rougher figures (for tests)")
    calibrate.set_defaults(command=cmd_calibrate)
    predict = sub.add_parser("predict", help="predict an experiment's points, or your own model, on other hardware")
    predict.add_argument("experiment", nargs="?", help="an experiment (see `list`); leave out with --model")
    predict.add_argument("--on", action="append", metavar="HARDWARE",
                         help="where to predict (repeatable): a catalogue name, 'this' (this machine's calibrated "
                              "CPU), 'this:cuda:N', a calibrated machine id; 'list' lists them. Default: this "
                              "machine and the write-up's GPU (with --model: this machine and every catalogue GPU)")
    predict.add_argument("--host", default="this", help="the CPU that drives a GPU (default: this machine's)")
    predict.add_argument("--preset", default="quick", help="smoke, quick (default) or paper")
    predict.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    predict.add_argument("--model", metavar="FILE.py:BUILD_FN", help="your own model: a function returning an nn.Module")
    predict.add_argument("--input", metavar="SHAPE", help="with --model: the input's shape, batch first (512x84)")
    predict.add_argument("--train", action="store_true", help="with --model: a training step, not a forward")
    predict.add_argument("--accuracy", action="store_true",
                         help="the model checked against every measured point of every calibrated machine")
    predict.add_argument("--writeups", action="store_true",
                         help="every published timing figure predicted on the write-up's hardware (saved for the "
                              "Predictions page)")
    predict.add_argument("--json", action="store_true", help="print a JSON array for scripts")
    predict.set_defaults(command=cmd_predict)
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


def cmd_run(args) -> int:
    if settings.read_only():
        raise settings.ReadOnlyError()
    exp = experiments.get(clip(args.experiment))  # clipped: a long name is unknown anyway, and echoed
    given = _config_json(args.config_json) if args.config_json else {}
    typed = parse_overrides(exp, args.set)
    both = sorted(given.keys() & typed.keys())
    if both:
        raise ConfigError(both[0], "given both in --config-json and with --set; allowed: one of them")
    config = exp.config(args.preset, given | typed)
    names = _devices(args.device)
    exp.plan(config, names)
    writer = results.RecordWriter(exp.name, args.preset, config, names, run_id=args.run_id)
    lock_fd = _hold_lock(writer, names)
    try:
        print(f"{exp.name} ({args.preset}) on {', '.join(names)} -> {writer.path}", flush=True)
        status = runner.run(exp, config, names, writer, progress=_print_progress, standin_progress=_print_standin)
        print(f"{status}: {writer.path}", flush=True)
    finally:
        runlock.release(lock_fd)
    return 0 if status == "complete" else 1


def _devices(given: list[str] | None) -> list[str]:
    """The devices named (each once, in the order first given), or every device here."""
    if not given:
        return devices.available()
    return list(dict.fromkeys(devices.check(clip(d)) for d in given))


def cmd_calibrate(args) -> int:
    settings.require_writable("calibration")
    names = calibrate.devices_to_calibrate(args.device)
    busy = runlock.holder()
    if busy is not None:  # a run's work would skew the measurements, and they its timings
        raise runlock.BusyError(busy)
    profile = calibrate.take(names, quick=args.quick)
    print(calibrate.report(profile))
    try:
        path = profiles.save(profile)
    except profiles.ProfileError as e:
        print(f"error: the measurement looks broken, profile not written: {e}", file=sys.stderr)
        return 1
    print(f"calibrated {', '.join(names)} in {profile['seconds']:.0f} s: {path}")
    return 0


def cmd_predict(args) -> int:
    if args.on and "list" in (name.strip().lower() for name in args.on):
        return _print_catalogue(args.json)
    if args.accuracy or args.writeups:
        return _print_accuracy(args.json) if args.accuracy else _validate_writeups(args.json)
    if args.model:
        if args.experiment or args.set:
            raise ConfigError("--model", "predicts your own model: give no experiment and no --set with it")
        return _predict_model(args)
    if args.input or args.train:
        raise ConfigError("--input" if args.input else "--train", "goes with --model only")
    if not args.experiment:
        raise ConfigError("experiment", "name an experiment (see `python -m core list`) or give --model")
    exp = experiments.get(clip(args.experiment))
    config = exp.config(args.preset, parse_overrides(exp, args.set))
    targets = [hardware.resolve(clip(name), host=clip(args.host)) for name in args.on or ("this",)]
    if not args.on:
        targets.append(hardware.writeup_target(exp.source)[0])
    found = []
    for target in targets:
        points = predictions.plan(exp, config, target)
        with tqdm(total=len(points), desc=f"census for {target.title}", unit="point", disable=None,
                  file=sys.stderr) as bar:
            predicted = predictions.predict_points(exp, config, target, progress=lambda point: bar.update())
        found.append((target, predicted))
    if args.json:
        print(json.dumps([p.to_dict(target) for target, predicted in found for p in predicted], indent=1))
        return 0
    for target, predicted in found:
        print(f"{exp.name} ({args.preset}) predicted on {target.title}:")
        for p in predicted:
            print(f"  {p.point.variant} {results.point_text(p.point.params)}".rstrip() + f": {_prediction_text(p)}")
    return 0


def _print_accuracy(as_json: bool) -> int:
    frame = predictions.accuracy(results.load_records())
    if as_json:
        print(frame.to_json(orient="records", indent=1))
        return 0
    for (machine, device), part in frame.groupby(["machine", "device"]):
        print(f"{machine} {device}: {predictions.accuracy_text(part, devices.kind(device))}")
        for _, row in part.iterrows():
            print(f"  {row['experiment']} {row['variant']} {row['point']}: measured {_seconds_text(row['measured_s'])}, "
                  f"predicted {_seconds_text(row['predicted_s'])} (x{row['ratio']:.2f})")
    if frame.empty:
        print("no measured point with a census on a machine with a calibrated profile: run `python -m core "
              "calibrate`, then an experiment")
    return 0


def _validate_writeups(as_json: bool) -> int:
    with tqdm(desc="write-up figures", unit="census", disable=None, file=sys.stderr) as bar:
        frame = writeups.validate(progress=lambda *_: bar.update())
    if not settings.read_only():
        print(f"saved: {writeups.save(frame)}", file=sys.stderr)
    print(frame.to_json(orient="records", indent=1) if as_json else writeups.report_text(frame))
    return 0


def _print_catalogue(as_json: bool) -> int:
    rows = hardware.listing()
    if as_json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print("  ".join(f"{value}" for value in row.values()))
    return 0


def _prediction_text(p: predictions.Predicted) -> str:
    if p.prediction is None:
        return f"no prediction: {p.error}"
    unit = f" per {call_text(p.unit, p.per_call)}" if p.unit else ""
    return f"{_seconds_text(p.prediction.seconds)}{unit} ({costmodel.shares_text(p.prediction.parts, p.prediction.seconds)})"


def _seconds_text(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def _predict_model(args) -> int:
    if not args.input:
        raise ConfigError("--input", "give the input's shape with --model, batch first (e.g. 512x84)")
    shape = ownmodel.parse_input(args.input)
    model = ownmodel.load(args.model)  # refused on a read-only instance: it runs the file
    names = args.on or ["this", *(row["name"] for row in hardware.listing() if row["kind"] == "gpu")]
    targets = [hardware.resolve(clip(name), host=clip(args.host)) for name in names]
    report = ownmodel.predict(model, shape, args.train, targets)
    print(json.dumps(report, indent=1) if args.json else ownmodel.report_text(report, args.model, args.train))
    return 0


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


def _print_progress(done: int, total: int, point, row: dict) -> None:
    if row["status"] != "ok":
        outcome = f"{row['status']}: {row.get('error')}"
    elif row.get("median") is not None:
        spread = f"IQR {row['iqr'] * 1e3:.2g} ms" if row["iqr"] is not None else "one sample"
        outcome = (f"median {row['median'] * 1e3:.4g} ms per {call_text(row['unit'], row['per_call'])} "
                   f"({spread}, n={row['n']}{', noisy' if row['noisy'] else ''})")
    else:
        outcome = "done"
    print(f"[{done}/{total}] {point.describe()}: {outcome}{_inspection_text(row)}", flush=True)


def _print_standin(done: int, total: int, point, entry: dict) -> None:
    found = entry["census"]
    what = (census.describe(found, entry["unit"], entry["per_call"]) if "operations" in found
            else f"no census: {found.get('skipped') or found.get('error')}")
    print(f"[GPU stand-in {done}/{total}] {point.variant} {results.point_text(point.params)}: "
          f"{what}", flush=True)


def _inspection_text(row: dict) -> str:
    """'; 38 operations, ... per epoch; mostly host overhead (81%)' from the row's census and breakdown."""
    found, parts = row.get("census") or {}, row.get("breakdown") or {}
    text = f"; {census.describe(found, row['unit'], row['per_call'])}" if "operations" in found else ""
    if parts.get("adds_up"):
        part = max(breakdown.PARTS, key=lambda p: parts[f"{p}_s"])
        text += f"; mostly {breakdown.LABELS[part]} ({parts[f'{part}_s'] / row['median']:.0%})"
    elif parts.get("adds_up") is False:
        text += "; the profile could not be reconciled with the timing"
    return text
