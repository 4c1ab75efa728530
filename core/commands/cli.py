"""`python -m core info | list | run | cancel | calibrate | predict | export | import | report`: the headless
entry point; the app's run button uses `run`, its cancel button does what `cancel` does."""
import argparse
import json
import math
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from core import devices, experiments, settings, versions
from core.measure import breakdown, census, runner, standin
from core.report import bundles, single_file
from core.calibration import calibrate
from core.model import costmodel, hardware, profiles
from core.commands import jobs
from core.predict import ownmodel, predictions, writeups
from core.store import results, runlock
from core.params import PRESETS
from core.params import ConfigError, clip, shown
from core.present.tables import seconds_text
from core.store.results import call_text


def main(argv: list[str] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.command(args)
    except (runlock.BusyError, ConfigError, devices.DeviceError, settings.ReadOnlyError, hardware.HardwareError,
            costmodel.PredictionError, bundles.BundleError) as e:
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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m core", description="Crossover, headless.")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="this machine: CPU, cores, memory, GPUs, versions, code version")
    info.add_argument("--json", action="store_true", help="print the raw fingerprint as JSON")
    info.set_defaults(command=cmd_info)
    listing = sub.add_parser("list", help="experiments, their parameters with each preset's values, and variants")
    listing.add_argument("experiment", nargs="?", help="only this experiment")
    listing.set_defaults(command=cmd_list)
    run = sub.add_parser("run", help="run one experiment and write a results record")
    run.add_argument("experiment")
    run.add_argument("--device", action="append", help="a device (repeatable); default: every device here")
    run.add_argument("--preset", default="quick", help="smoke, quick (default) or paper")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    run.add_argument("--run-id", help=argparse.SUPPRESS)
    run.add_argument("--config-json", help=argparse.SUPPRESS)  # the app's jobs pass their checked configuration
    run.set_defaults(command=cmd_run)
    cancel = sub.add_parser("cancel", help="stop the run going on after its current point, keeping the points "
                                           "it finished (exit status 1 when no run is going on)")
    cancel.set_defaults(command=cmd_cancel)
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
                              "machine and the write-up's GPU driven by the write-up's CPU (with --model: the --host "
                              "CPU and every catalogue GPU; GPUs named alone are compared with the --host CPU)")
    predict.add_argument("--host", default="this", help="the CPU that drives the GPUs named with --on, and with "
                                                        "--model every GPU (default: this machine's)")
    predict.add_argument("--preset", help="smoke, quick (default) or paper")
    predict.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    predict.add_argument("--model", metavar="FILE.py:BUILD_FN", help="your own model: a function returning an nn.Module")
    predict.add_argument("--input", metavar="SHAPE",
                         help="with --model: the input's shape, batch first (512x84), and its element type for "
                              "indices such as token ids (32x50:int64)")
    predict.add_argument("--train", action="store_true", help="with --model: a training step, not a forward")
    predict.add_argument("--check", action="store_true",
                         help="with --model: also time it on this machine's CPU (torch.utils.benchmark) and print the "
                              "measurement beside the prediction for it")
    predict.add_argument("--accuracy", action="store_true",
                         help="the model checked against every measured point of every calibrated machine")
    predict.add_argument("--writeups", action="store_true",
                         help="every published timing figure and GPU speedup predicted on the write-up's "
                              "hardware (saved for the Predictions page)")
    predict.add_argument("--json", action="store_true", help="print a JSON array for scripts")
    predict.set_defaults(command=cmd_predict)
    export = sub.add_parser("export", help="write records (and their machines' calibrated profiles) into one bundle "
                                           "to carry to another Crossover")
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="the bundle to write (.tar.gz)")
    export.add_argument("--machine", action="append", metavar="ID", help="only this machine's records (repeatable; "
                                                                          "ids: `python -m core info`, the Machines page)")
    export.add_argument("--experiment", action="append", metavar="NAME", help="only this experiment (repeatable)")
    export.set_defaults(command=cmd_export)
    importing = sub.add_parser("import", help="check a bundle's every record and merge it into the results folder")
    importing.add_argument("bundle", metavar="FILE", help="a bundle written by `export` (or the Machines page)")
    importing.set_defaults(command=cmd_import)
    report = sub.add_parser("report", help="write one self-contained HTML report that opens offline in any browser")
    report.add_argument("-o", "--output", default="report.html", metavar="FILE", help="default: report.html")
    report.set_defaults(command=cmd_report)
    return parser


def _path(text: str, field: str) -> Path:
    """A file named on the command line; an empty name is refused (Path('') would be the folder here)."""
    if not text.strip():
        raise ConfigError(field, "name a file (the name given is empty)")
    return Path(text)


def cmd_export(args) -> int:
    _path(args.output, "--output")
    exported = bundles.export(args.output, args.machine, args.experiment)
    print(exported.text(args.output))
    return 0


def cmd_import(args) -> int:
    """Exit status 0 when every member was added or skipped, 1 when any was refused (2: not a bundle)."""
    imported = bundles.import_bundle(_path(args.bundle, "bundle"))
    print(imported.text())
    return 1 if imported.refused else 0


def cmd_report(args) -> int:
    print(single_file.write(_path(args.output, "--output")).text())
    return 0


def cmd_info(args) -> int:
    fp = devices.fingerprint()
    print(json.dumps(fp, indent=1) if args.json else info_text(fp, versions.code_version()))
    return 0


def info_text(fp: dict, code: dict) -> str:
    """The fingerprint for people, one line per field."""
    gpus = [f"{g.get('device', 'cuda')}: {g['name']} ({g.get('memory_gib', '?')} GiB, compute capability "
            f"{g.get('compute_capability', '?')}, driver {g.get('cuda_driver', '?')})" for g in fp.get("gpus", [])]
    if fp.get("mps"):
        gpus.append("mps: Apple GPU")
    lines = {
        "machine": fp["machine_id"],
        "CPU": f"{devices.cpu_text(fp)}: {fp.get('cpu_physical_cores', '?')} physical cores, {fp['cpu_logical_cores']} "
               f"logical (hardware threads); torch uses {fp.get('torch_threads', '?')} threads",
        "memory": f"{fp.get('memory_gib', '?')} GiB",
        "OS": fp.get("os", "?"),
        "GPUs": "; ".join(gpus) or "none: only the CPU variants run here",
        "versions": ", ".join(f"{name} {fp.get(key) or '-'}" for name, key in (
            ("Python", "python"), ("torch", "torch"), ("numpy", "numpy"), ("CUDA", "cuda"), ("cuDNN", "cudnn"))),
        "code": (f"commit {code['commit'][:12]}{' with uncommitted changes' if code['dirty'] else ''}"
                 if "commit" in code else f"package {code.get('package')}"),
    }
    return "\n".join(f"{name + ':':<10}{value}" for name, value in lines.items())


def cmd_list(args) -> int:
    chosen = ([experiments.get(clip(args.experiment))] if args.experiment is not None
              else experiments.registry().values())
    print("\n\n".join(listing_text(exp) for exp in chosen))
    return 0


def listing_text(exp) -> str:
    """An experiment's parameters (what each allows and its value in every preset) and its variants."""
    configs = {preset: exp.config(preset) for preset in PRESETS}
    lines = [f"{exp.name}: {exp.title}", "  parameters (--set NAME=VALUE), with their value in each preset:"]
    for p in exp.all_params():
        shown_values = {preset: _show(p, config[p.name]) for preset, config in configs.items()}
        values = ("every preset: " + shown_values["quick"] if len(set(shown_values.values())) == 1
                  else "; ".join(f"{preset}: {value}" for preset, value in shown_values.items()))
        lines += [f"    {p.name}: {p.help} ({p.allowed()})", f"      {values}"]
    lines.append("  variants:")
    lines += [f"    '{v.name}' on {'/'.join(v.kinds)}: {v.help}" for v in exp.variants]
    return "\n".join(lines)


def _show(p, value) -> str:
    if p.many and p.choices and set(value) == set(p.choices):
        return "all"
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
    planned = len(exp.plan(config, names))
    writer = results.RecordWriter(exp.name, args.preset, config, names, run_id=args.run_id)
    lock_fd = _hold_lock(writer, names)
    try:
        print(f"{exp.name} ({args.preset}) on {', '.join(names)} -> {writer.path}", flush=True)
        with _progress_bar(f"{exp.name} ({args.preset})", planned) as bar:
            status = runner.run(exp, config, names, writer, progress=bar.finished, standin_progress=bar.standin,
                                starting=bar.starting)
        print(f"{status}: {writer.path}", flush=True)
    finally:
        runlock.release(lock_fd)
    return 0 if status == "complete" else 1


def cmd_cancel(args) -> int:
    try:
        stopped = jobs.cancel()
    except PermissionError:
        print("error: the run going on belongs to another user: it can only be cancelled as that user",
              file=sys.stderr)
        return 2
    if stopped is None:
        print("no run is going on")
        return 1
    print(f"cancelled run {stopped['run_id']} ({stopped['experiment']}, {stopped['preset']} preset, on "
          f"{', '.join(stopped['devices'])}): it stops after its current point; the {stopped['done']} of "
          f"{stopped['total'] or '?'} points it finished stay in {stopped['record']}")
    return 0


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
    try:
        path, broken = profiles.save(profile), None  # before the report: minutes of measuring outlive a display fault
    except profiles.ProfileError as e:
        path, broken = None, e
    print(calibrate.report(profile))
    if broken:
        print(f"error: the measurement looks broken, profile not written: {broken}. Other work during the calibration "
              f"usually does this (the note above says how busy the machine was, where it was): run `python -m core "
              f"calibrate` again when the machine is idle", file=sys.stderr)
        return 1
    print(f"calibrated {', '.join(names)} in {profile['seconds']:.0f} s: {path}")
    return 0


# predict's jobs besides an experiment's points, each with the options it takes besides --json
PREDICT_JOBS = {"--on list": (), "--accuracy": (), "--writeups": (), "--model": ("--on", "--host", "--input", "--train",
                                                                                 "--check")}


def cmd_predict(args) -> int:
    job = _predict_job(args)
    if job == "--on list":
        return _print_catalogue(args.json)
    if job in ("--accuracy", "--writeups"):
        return _print_accuracy(args.json) if job == "--accuracy" else _validate_writeups(args.json)
    if job == "--model":
        return _predict_model(args)
    if not args.experiment:
        raise ConfigError("experiment", "name an experiment (see `python -m core list`) or give --model")
    exp = experiments.get(clip(args.experiment))
    preset = args.preset or "quick"  # None when not given: --preset goes with an experiment only
    config = exp.config(preset, parse_overrides(exp, args.set))
    if args.host != hardware.THIS and not args.on:
        raise ConfigError("--host", "drives the GPUs named with --on: give --on too (by default the write-up's GPU is "
                                    "driven by the write-up's CPU)")
    names = dict.fromkeys(clip(name) for name in args.on or ("this",))  # a name given twice predicts once
    targets = [hardware.resolve(name, host=clip(args.host)) for name in names]
    if not args.on:
        targets.append(hardware.writeup_target(exp.source)[0])
    found, censuses = [], standin.Censuses(standin.entry)
    for target in targets:
        points = predictions.plan(exp, config, target)
        with tqdm(total=len(points), desc=f"census for {target.title}", unit="point", disable=None,
                  file=sys.stderr) as bar:
            predicted = predictions.predict_points(exp, config, target, progress=lambda point: bar.update(),
                                                   censuses=censuses)
        if args.json:
            found += [p.to_dict(target) for p in predicted]
        else:  # each target's lines as soon as they are known: a census of many points takes a while
            _print_predicted(f"{exp.name} ({preset})", target, predicted, config["variants"])
    if args.json:
        print(json.dumps(found, indent=1))
    return 0


def _print_predicted(what: str, target: hardware.Target, predicted: list[predictions.Predicted],
                     variants: list[str]) -> None:
    print(f"{what} predicted on {target.title}:")
    if not predicted:
        print(f"  no point of this configuration runs on it (its variants: {', '.join(variants)})", flush=True)
    for p in predicted:
        print(f"  {p.point.variant} {results.point_text(p.point.params)}".rstrip() + f": {_prediction_text(p)}",
              flush=True)


def _predict_job(args) -> str:
    """Which job the options ask of predict: an experiment's points, or one of PREDICT_JOBS; two jobs at once, or an
    option that goes with another job, is refused by name."""
    listing = any(name.strip().lower() == "list" for name in args.on or ())
    jobs = [job for job, asked in (("--on list", listing), ("--accuracy", args.accuracy), ("--writeups", args.writeups),
                                   ("--model", args.model is not None)) if asked]
    if len(jobs) > 1:
        raise ConfigError(jobs[1], f"{jobs[0]} and {jobs[1]} are two jobs: give one of them")
    given = {"experiment": args.experiment is not None, "--set": bool(args.set), "--preset": args.preset is not None,
             "--on": bool(args.on) and not (listing and len(args.on) == 1), "--host": args.host != hardware.THIS,
             "--input": args.input is not None, "--train": args.train, "--check": args.check}
    job = jobs[0] if jobs else "experiment"
    takes = PREDICT_JOBS.get(job, ("experiment", "--set", "--preset", "--on", "--host"))
    stray = next((option for option, present in given.items() if present and option not in takes), None)
    if stray is None:
        return job
    if job == "--model":
        raise ConfigError(stray, "--model predicts your own model: give no experiment, --set or --preset with it")
    if job == "experiment":
        raise ConfigError(stray, "goes with --model only")
    raise ConfigError(stray, "'list' lists the catalogue: give it alone" if job == "--on list" and stray == "--on"
                      else f"{job} takes no other option than --json")


def _print_accuracy(as_json: bool) -> int:
    records = results.load_records()
    repeats = predictions.repeatability(records)
    frame = predictions.with_repeats(predictions.accuracy(records), repeats)
    catalogue = predictions.catalogue_accuracy(records)
    if as_json:  # each point checked with its machine's own profile, then with the catalogue's entry for its GPU
        checked = pd.concat([frame.assign(predicted_with="its machine's profile"),
                             catalogue.assign(predicted_with="the catalogue")], ignore_index=True)
        print(checked.to_json(orient="records", indent=1))
        return 0
    here = devices.fingerprint()["machine_id"]
    for (machine, machine_id, device), part in frame.groupby(["machine", "machine_id", "device"]):
        ours = " (this machine)" if machine_id == here else ""
        print(f"{machine_id}{ours}: {machine} {device}: {predictions.accuracy_text(part, devices.kind(device))}")
        print(f"  by what bounds the prediction: {predictions.bound_text(part)}")
        if unmeasured := predictions.unmeasured_text(machine_id, device):
            print(f"  {unmeasured}")
        if quick := predictions.quick_profile_text(machine_id, device):
            print(f"  {quick}")
        if blind := predictions.graph_blind_text(records, machine_id, device):
            print(f"  {blind}")
        repeated = predictions.repeatability_text(repeats[(repeats["machine_id"] == machine_id)
                                                          & (repeats["device"] == device)])
        if repeated:
            print(f"  how far its measurements repeat: {repeated}")
        for _, row in part.iterrows():
            again = ("; one cold call, no warm-up" if row["cold"] else "") + (
                "" if math.isnan(row["measured_before_s"])
                else f"; the run before measured {seconds_text(row['measured_before_s'])}")
            print(f"  {row['experiment']} {row['variant']} {row['point']}: measured {seconds_text(row['measured_s'])}, "
                  f"predicted {seconds_text(row['predicted_s'])} (x{row['ratio']:.2f}{again})")
    for row in predictions.catalogue_summary(catalogue).itertuples():
        print(f"The catalogue's {row.hardware}, against that machine's measured GPU: {row.points} points, median "
              f"predicted/measured {row.median_ratio:.2f}, {row.share_within:.0%} within {predictions.WITHIN:g}x, "
              f"{row.share_within_2x:.0%} within 2x, worst {row.worst_ratio:.2f}")
    if frame.empty:
        print("no measured point with a census on a machine with a calibrated profile: run `python -m core "
              "calibrate`, then an experiment")
    return 0


def _validate_writeups(as_json: bool) -> int:
    with tqdm(desc="write-up figures", unit="census", disable=None, file=sys.stderr) as bar:
        frame = writeups.validate(experiments.registry(), progress=lambda *_: bar.update())
    print(f"saved: {writeups.save(frame)}" if not settings.read_only() else
          "not saved: this instance is read-only (the Predictions page keeps the validation it has)", file=sys.stderr)
    print(frame.to_json(orient="records", indent=1) if as_json else writeups.report_text(frame))
    return 0


def _print_catalogue(as_json: bool) -> int:
    rows = hardware.listing()
    if as_json:
        print(json.dumps(rows, indent=1))
        return 0
    table = pd.DataFrame(rows).astype(str)
    widths = {column: max(len(column), table[column].str.len().max()) for column in table}
    print(table.to_string(index=False, justify="left",
                          formatters={column: f"{{:<{width}}}".format for column, width in widths.items()}))
    return 0


def _prediction_text(p: predictions.Predicted) -> str:
    if p.prediction is None:
        return f"no prediction: {p.error}"
    unit = f" per {p.unit if p.per_call == 1 else call_text(p.unit, p.per_call)}" if p.unit else ""
    return f"{seconds_text(p.prediction.seconds)}{unit} ({costmodel.shares_text(p.prediction.parts, p.prediction.seconds)})"


def _predict_model(args) -> int:
    if not args.input:
        raise ConfigError("--input", "give the input's shape with --model, batch first (e.g. 512x84)")
    given = ownmodel.parse_input(args.input)
    model = ownmodel.load(args.model)  # refused on a read-only instance: it runs the file
    names = dict.fromkeys(args.on or [args.host, *(row["name"] for row in hardware.listing() if row["kind"] == "gpu")])
    targets = [hardware.resolve(clip(name), host=clip(args.host)) for name in names]
    if all(target.gpu is not None for target in targets):  # the GPUs' crossover is against the CPU that drives them
        targets.insert(0, hardware.resolve(clip(args.host)))
    measured = _measure_model(args, given, targets) if args.check else None
    report = ownmodel.predict(model, given, args.train, targets)
    if measured:
        report = ownmodel.beside(report, measured, hardware.THIS)
    print(json.dumps(report, indent=1) if args.json else
          ownmodel.report_text(report, args.model, args.train, compiled=ownmodel.eager(model)[1]))
    return 0


def _measure_model(args, given: ownmodel.Input, targets: list):
    """--check: the model (a build of its own) timed on this machine's CPU, which must be among the targets."""
    if not any(target.gpu is None and target.name == hardware.THIS for target in targets):
        raise ConfigError("--check", "times your model on this machine's CPU, beside the prediction for it: predict "
                                     "it there too (leave out --host, or add --on this)")
    return ownmodel.measure(ownmodel.load(args.model), given, args.train)


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


TICK_S = 1.0  # the bar is redrawn this often, so that its elapsed time moves during a long point


class _Progress:
    """What `run` prints: a line per finished point and per stand-in census, and on a terminal a tqdm bar
    below them (points done, elapsed, estimated time left, the point being measured). Where stdout is not
    a terminal (an app's run writes to its log) the bar is off and the lines alone are printed."""

    def __init__(self, bar: tqdm):
        self.bar = bar

    def starting(self, i: int, total: int, point) -> None:
        self.bar.set_postfix_str(f"now: {point.describe()}", refresh=True)

    def finished(self, done: int, total: int, point, row: dict) -> None:
        self._line(f"[{done}/{total}] {point.describe()}: {point_outcome(row)}{_inspection_text(row)}")
        self.bar.update()

    def standin(self, done: int, total: int, point, entry: dict) -> None:
        if done == 1:
            self.bar.reset(total)
            self.bar.set_description_str("GPU stand-in censuses")
        found = entry["census"]
        what = (census.describe(found, entry["unit"], entry["per_call"]) if "operations" in found
                else f"no census: {found.get('skipped') or found.get('error')}")
        self.bar.set_postfix_str(f"now: {point.variant} {results.point_text(point.params)}".rstrip())
        self._line(f"[GPU stand-in {done}/{total}] {point.variant} {results.point_text(point.params)}: {what}")
        self.bar.update()

    def _line(self, text: str) -> None:
        self.bar.write(text, file=sys.stdout)  # above the bar, which is drawn again below it
        sys.stdout.flush()


def on_terminal() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


@contextmanager
def _progress_bar(what: str, total: int):
    """A _Progress whose bar (on stderr) is redrawn every TICK_S by a thread of its own: tqdm draws only
    when told, so without it the elapsed time would stand still for the whole of a long point."""
    with tqdm(desc=what, total=total, unit="point", file=sys.stderr, disable=not on_terminal(), smoothing=0,
              bar_format="{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed} elapsed, about {remaining} left{postfix}"
              ) as bar:
        stop = threading.Event()
        ticker = threading.Thread(target=_tick, args=(bar, stop), name="progress bar", daemon=True)
        if not bar.disable:
            ticker.start()
        try:
            yield _Progress(bar)
        finally:
            stop.set()
            if ticker.is_alive():
                ticker.join()


def _tick(bar: tqdm, stop: threading.Event) -> None:
    while not stop.wait(TICK_S):
        bar.refresh()


def point_outcome(row: dict) -> str:
    """'median 132 ms per epoch (one sample: 2,000 epochs in 264 s; IQR 3%, n=5)', or the failure."""
    if row["status"] != "ok":
        return f"{row['status']}: {row.get('error')}"
    if row.get("median") is None:
        return "done"
    per_call = row["per_call"] or 1
    sample = (f"one sample: {call_text(row['unit'], per_call)} in {seconds_text(row['median'])}; "
              if per_call > 1 else "")
    spread = f"IQR {row['iqr'] / row['median']:.0%}" if row["iqr"] is not None and row["median"] > 0 else "one sample"
    return (f"median {seconds_text(row['median'] / per_call)} per {row['unit']} "
            f"({sample}{spread}, n={row['n']}{', noisy' if row['noisy'] else ''})")


def _inspection_text(row: dict) -> str:
    """'; 38 operations, ... per epoch; mostly host overhead (81%)' from the row's census and breakdown."""
    found, parts = row.get("census") or {}, row.get("breakdown") or {}
    text = f"; {census.describe(found, row['unit'], row['per_call'])}" if "operations" in found else ""
    if parts.get("adds_up"):
        part = max(breakdown.PARTS, key=lambda p: parts[f"{p}_s"])
        text += f"; mostly {breakdown.LABELS[part]} ({parts[f'{part}_s'] / row['median']:.0%})"
    elif parts.get("adds_up") is False:  # the run's own timing stands; only its split is missing
        text += "; no split of its time: the profiler's overhead outgrew these tiny operations"
    return text
