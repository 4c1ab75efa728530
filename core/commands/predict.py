"""`python -m core predict`: an experiment's points, or your own model, predicted on other hardware; the model's
accuracy (--accuracy), the write-ups' figures (--writeups) and the catalogue (--on list)."""
import json
import math
import sys

import pandas as pd
from tqdm import tqdm

from core import devices, experiments, settings
from core.commands.run import parse_overrides
from core.measure import standin
from core.model import costmodel, hardware, profiles
from core.params import ConfigError, clip, file_path
from core.predict import ownmodel, predictions, uncertainty, writeups
from core.present.tables import seconds_text
from core.store import files, results


def register(sub) -> None:
    parser = sub.add_parser("predict", help="predict an experiment's points, or your own model, on other hardware")
    parser.add_argument("experiment", nargs="?", help="an experiment (see `list`); leave out with --model")
    parser.add_argument("--on", action="append", metavar="HARDWARE",
                        help="where to predict (repeatable): a catalogue name, 'this' (this machine's calibrated "
                             "CPU), 'this:cuda:N', a calibrated machine id; 'list' lists them. Default: this "
                             "machine and the write-up's GPU driven by the write-up's CPU (with --model: the --host "
                             "CPU and every catalogue GPU; GPUs named alone are compared with the --host CPU)")
    parser.add_argument("--host", default="this", help="the CPU that drives the GPUs named with --on, and with "
                                                       "--model every GPU (default: this machine's)")
    parser.add_argument("--preset", help="smoke, quick (default) or paper")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    parser.add_argument("--model", metavar="FILE.py:BUILD_FN", help="your own model: a function returning an nn.Module")
    parser.add_argument("--input", metavar="SHAPE",
                        help="with --model: the input's shape, batch first (512x84), and its element type for "
                             "indices such as token ids (32x50:int64)")
    parser.add_argument("--train", action="store_true", help="with --model: a training step, not a forward")
    parser.add_argument("--check", action="store_true",
                        help="with --model: also time it on this machine's CPU (torch.utils.benchmark) and print the "
                             "measurement beside the prediction for it")
    parser.add_argument("--out", metavar="FILE.json", help="with --model: also write the report (as --json prints it) "
                                                           "to this file")
    parser.add_argument("--accuracy", action="store_true",
                        help="the model checked against every measured point of every calibrated machine")
    parser.add_argument("--writeups", action="store_true",
                        help="every published timing figure and GPU speedup predicted on the write-up's "
                             "hardware (saved for the Predictions page)")
    parser.add_argument("--json", action="store_true", help="print a JSON array for scripts")
    parser.set_defaults(command=run)


def run(args) -> int:
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
    found, censuses, bands = [], standin.Censuses(standin.entry), uncertainty.load()
    for target in targets:
        points = predictions.plan(exp, config, target)
        with tqdm(total=len(points), desc=f"census for {target.title}", unit="point", disable=None,
                  file=sys.stderr) as bar:
            predicted = predictions.predict_points(exp, config, target, progress=lambda point: bar.update(),
                                                   censuses=censuses)
        if args.json:
            found += [p.to_dict(target) for p in predicted]
        else:  # each target's lines as soon as they are known: a census of many points takes a while
            _print_predicted(f"{exp.name} ({preset})", target, predicted, config["variants"], bands)
    if args.json:
        print(json.dumps(found, indent=1))
    return 0


# predict's jobs besides an experiment's points, each with the options it takes besides --json
PREDICT_JOBS = {"--on list": (), "--accuracy": (), "--writeups": (), "--model": ("--on", "--host", "--input", "--train",
                                                                                 "--check", "--out")}


def _print_predicted(what: str, target: hardware.Target, predicted: list[predictions.Predicted],
                     variants: list[str], bands: list[uncertainty.Band]) -> None:
    print(f"{what} predicted on {target.title}:")
    if not predicted:
        print(f"  no point of this configuration runs on it (its variants: {', '.join(variants)})", flush=True)
    kind = "cpu" if target.gpu is None else "cuda"
    for p in predicted:
        print(f"  {p.point.variant} {results.point_text(p.point.params)}".rstrip()
              + f": {_prediction_text(p, kind, bands)}", flush=True)


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
             "--input": args.input is not None, "--train": args.train, "--check": args.check,
             "--out": args.out is not None}
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
    bands = uncertainty.bands(frame, catalogue)
    saved = uncertainty.save(bands) if bands and not settings.read_only() else None
    if as_json:  # each point checked with its machine's own profile, then with the catalogue's entry for its GPU
        checked = pd.concat([frame.assign(predicted_with="its machine's profile"),
                             catalogue.assign(predicted_with="the catalogue")], ignore_index=True)
        print(checked.to_json(orient="records", indent=1))
        return 0
    here = devices.fingerprint()["machine_id"]
    print(f"Regimes: {predictions.bounds_text()}; |error| = |predicted - measured| / measured.")
    for (machine, machine_id, device), part in frame.groupby(["machine", "machine_id", "device"]):
        ours = " (this machine)" if machine_id == here else ""
        print(f"{machine_id}{ours}: {machine} {device}: {predictions.accuracy_text(part, devices.kind(device))}")
        print(f"  by regime: {predictions.bound_text(part)}")
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
    for machine_id, part in uncertainty.paired_speedups(frame, catalogue).groupby("machine_id"):
        print(f"{machine_id}: the GPU speedup over its CPU (the catalogue's GPU over its own profile's CPU), predicted "
              f"against measured, by the GPU point's regime: {predictions.bound_text(part)}")
    print(_bands_text(bands, saved))
    if frame.empty:
        print("no measured point with a census on a machine with a calibrated profile: run `python -m core "
              "calibrate`, then an experiment")
    return 0


def _bands_text(bands: list[uncertainty.Band], saved) -> str:
    """The error bands a predicted time's range comes from, and where they were saved."""
    if not bands:
        return (f"No error band: fewer than {uncertainty.MIN_POINTS} checked points of any kind, so predicted times "
                f"carry no range.")
    low, high = uncertainty.BAND
    lines = [f"The ranges predicted times carry ({low:.0%} to {high:.0%} of predicted/measured; a CPU's from the CPUs' "
             f"own profiles, a GPU's from the catalogue's entries against the GPUs that measured, a GPU's speedup "
             f"over a CPU ({uncertainty.SPEEDUP}) from both against configurations one run measured on both):"]
    lines += [f"  {band.kind} {band.regime}: {band.low:.2f} to {band.high:.2f} over {band.points} points"
              for band in bands]
    lines.append(f"saved: {saved}" if saved else "not saved: this instance is read-only")
    return "\n".join(lines)


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


def _prediction_text(p: predictions.Predicted, kind: str, bands: list[uncertainty.Band]) -> str:
    """'1.2 ms per step (host-bound: host 80%, ...); likely 0.9 ms to 2.1 ms': the range from the error band of the
    target's kind and the prediction's regime, where one was saved."""
    if p.prediction is None:
        return f"no prediction: {p.error}"
    seconds = p.prediction.seconds
    unit = f" per {p.unit if p.per_call == 1 else results.call_text(p.unit, p.per_call)}" if p.unit else ""
    regime = predictions.bound(predictions.host_share(p.prediction))
    band = uncertainty.band_for(bands, kind, regime)
    likely = f"; {uncertainty.range_text(band.range(seconds), seconds)}" if band else ""
    return f"{seconds_text(seconds)}{unit} ({regime}: {costmodel.shares_text(p.prediction.parts, seconds)}){likely}"


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
    if args.out:
        files.write_atomic(file_path(args.out, "--out"), {"model": args.model, "input": given.text, "train": args.train,
                                                         "report": report})
    return 0


def _measure_model(args, given: ownmodel.Input, targets: list):
    """--check: the model (a build of its own) timed on this machine's CPU, which must be among the targets."""
    if profiles.load() is None:  # "this" is the nearest CPU standing in (hardware.nearest_cpu): nothing to check
        raise ConfigError("--check", f"times your model here beside the prediction for this machine's own CPU: "
                                     f"{profiles.missing_message()}")
    if not any(target.gpu is None and target.name == hardware.THIS for target in targets):
        raise ConfigError("--check", "times your model on this machine's CPU, beside the prediction for it: predict "
                                     "it there too (leave out --host, or add --on this)")
    return ownmodel.measure(ownmodel.load(args.model), given, args.train)
