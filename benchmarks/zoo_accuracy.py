"""How far the cost model's predictions for models it was never fitted on land from what they take on this machine's CPU.

For each model of the zoo (tests/zoo/models.py ZOO) as a forward and as a training step, one after the other, runs

    python -m core predict --model tests/zoo/models.py:FN --input SHAPE [--train] --check --json --on this

and reads the prediction for this machine's CPU and the measurement beside it (core.predict.ownmodel.beside). Prints,
per machine and per regime (core.predict.predictions.BOUNDS: what the host's predicted share makes a point), the
points, median and 90th percentile |error| (|predicted - measured| / measured), the shares within
1.25x and 1.5x, the worst ratio and the share predicted too fast; then every row. Needs this machine's calibrated
profile (`python -m core calibrate --quick` makes one). Time it on a quiet machine: the measurements are real.

    .venv/bin/python benchmarks/zoo_accuracy.py [--only NAME] [--json out.json] [--against earlier.json] [--no-cpu-only]

With --against (an earlier run's --json), it also says how far the measurements repeat: the share of the points both
runs measured whose two measurements agree within 1.25x and 1.5x, the limits the model's shares are judged at.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core import devices
from core.model import costmodel, hardware, profiles
from core.predict import ownmodel, predictions
from tests.zoo.models import ZOO

MODELS = "tests/zoo/models.py"
UNITS = {"forward": False, "train": True}
COLUMNS = ["machine_id", "model", "build", "input", "unit", "device", "predicted_s", "measured_s", "ratio", "within",
           "likely_low_s", "likely_high_s", "host_share", "bound", "regime", "noisy", "page_faults", "error"]


def run_one(build: str, shape: str, train: bool, cpu_only: bool) -> dict:
    """One `predict --model --check --json` in a process of its own: this CPU's entry of its report (with
    measured_s beside predicted_s), or {'error': ...}."""
    command = [sys.executable, "-m", "core", "predict", "--model", f"{MODELS}:{build}", "--input", shape, "--check",
               "--json", *(["--train"] if train else []), *(["--on", hardware.THIS] if cpu_only else [])]
    done = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]}
    measured = [entry for entry in json.loads(done.stdout) if "measured_s" in entry]
    return measured[0] if measured else {"error": "no entry of the report carries a measurement"}


def row(machine_id: str, name: str, build: str, shape: str, unit: str, entry: dict) -> dict:
    found = {"machine_id": machine_id, "model": name, "build": build, "input": shape, "unit": unit, "device": "cpu",
             "error": entry.get("error")}
    if found["error"]:
        return found
    ratio = entry["predicted_s"] / entry["measured_s"]
    prediction = costmodel.Prediction(entry["predicted_s"], entry.get("parts") or {}, entry["hardware"])
    share = predictions.host_share(prediction) if entry.get("parts") else None
    regime = predictions.bound(share) if share is not None else None
    likely = entry.get("likely_s") or (None, None)
    return found | {"predicted_s": entry["predicted_s"], "measured_s": entry["measured_s"], "ratio": ratio,
                    "likely_low_s": likely[0], "likely_high_s": likely[1],
                    "within": predictions.within(ratio), "host_share": share, "bound": regime, "regime": regime,
                    "noisy": entry.get("measured_noisy"), "page_faults": entry.get("measured_page_faults")}


def report(frame: pd.DataFrame) -> str:
    here = devices.fingerprint()["machine_id"]
    lines = []
    for machine_id, part in frame.groupby("machine_id"):
        done = part[part["error"].isna()]
        ours = " (this machine)" if machine_id == here else ""
        found = predictions.error_summary(done)
        lines.append(f"{machine_id}{ours}: zoo, {predictions.summary_text(found)}, {found['too_fast']:.0%} predicted "
                     f"too fast")
        lines.append(f"  by regime ({predictions.bounds_text()}): {predictions.bound_text(done)}")
        ranged = done[done["likely_low_s"].notna()]
        inside = ranged["measured_s"].between(ranged["likely_low_s"], ranged["likely_high_s"])
        lines.append(f"  measured inside the predicted range (the model's error on the experiments' points): "
                     f"{inside.mean():.0%} of {len(ranged)}" if len(ranged) else "  no predicted range (no error bands)")
        for r in part.itertuples():
            if isinstance(r.error, str):
                lines.append(f"  {r.model} {r.unit} {r.input}: no figure: {r.error}")
                continue
            notes = " (noisy measurement)" if r.noisy else ""
            if pd.notna(r.page_faults) and r.page_faults >= ownmodel.FAULTS_WORTH_SAYING:
                notes += f", {r.page_faults:,.0f} page faults a call"
            lines.append(f"  {r.model} {r.unit} {r.input}: predicted {r.predicted_s * 1e3:.4g} ms, measured "
                         f"{r.measured_s * 1e3:.4g} ms, x{r.ratio:.2f}, "
                         f"{'no parts' if pd.isna(r.host_share) else f'host share {r.host_share:.0%}, {r.regime}'}"
                         f"{notes}")
    return "\n".join(lines)


def repeatability(frame: pd.DataFrame, earlier: pd.DataFrame) -> str:
    """How far this run's measurements and an earlier run's (the same machine's same points) agree, as
    predictions.repeatability_text says it; '' where they share no measured point."""
    keys = ["machine_id", "model", "unit", "input"]
    both = frame.dropna(subset=["measured_s"]).merge(earlier.dropna(subset=["measured_s"])[keys + ["measured_s"]],
                                                     on=keys, suffixes=("", "_earlier"))
    text = predictions.repeatability_text(both.assign(ratio=both["measured_s"] / both["measured_s_earlier"]))
    return f"how far the measurements repeat against the earlier run: {text}" if text else ""


def _earlier(path: str) -> pd.DataFrame | str:
    """An earlier run's frame (its --json), read before this run's minutes of measuring, or what is wrong with it."""
    try:
        earlier = pd.read_json(path, orient="records")
    except (OSError, ValueError) as e:
        return f"--against: {path} is not an earlier run's --json output ({e})"
    missing = {"machine_id", "model", "unit", "input", "measured_s"} - set(earlier.columns)
    return f"--against: {path} lacks the columns {', '.join(sorted(missing))}" if missing else earlier


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="run only this zoo entry (its name or build function; repeatable)")
    parser.add_argument("--json", metavar="OUT", help="also save the frame of every row to OUT as JSON")
    parser.add_argument("--against", metavar="EARLIER", help="an earlier run's --json: say how far the measurements "
                                                             "of the points both measured agree")
    parser.add_argument("--cpu-only", action=argparse.BooleanOptionalAction, default=True,
                        help="predict on this machine's CPU only (default); --no-cpu-only predicts every catalogue GPU "
                             "too, as predict --model does by default (slower: each GPU's crossover sweep)")
    args = parser.parse_args()
    machine_id = devices.fingerprint()["machine_id"]
    if profiles.load(machine_id) is None:
        print(f"{profiles.missing_message(machine_id)}; `python -m core calibrate --quick` is enough here",
              file=sys.stderr)
        return 2
    entries = [entry for entry in ZOO if not args.only or entry[0] in args.only or entry[1] in args.only]
    if not entries:
        print(f"no zoo entry is named {', '.join(args.only)}: {', '.join(build for _, build, _ in ZOO)}",
              file=sys.stderr)
        return 2
    earlier = _earlier(args.against) if args.against else None
    if isinstance(earlier, str):
        print(earlier, file=sys.stderr)
        return 2
    rows = []
    for name, build, shape in entries:
        for unit, train in UNITS.items():
            print(f"{name} {unit} {shape} ...", file=sys.stderr, flush=True)
            rows.append(row(machine_id, name, build, shape, unit, run_one(build, shape, train, args.cpu_only)))
            if args.json:  # after each row: a run stopped part-way (a lent machine's time ending) keeps its rows
                pd.DataFrame(rows, columns=COLUMNS).to_json(args.json, orient="records", indent=1)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    print(report(frame))
    if earlier is not None:
        print(repeatability(frame, earlier) or f"no point of this run was measured in {args.against}")
    if args.json:
        print(f"saved: {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
