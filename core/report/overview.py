"""The overview's figures (the report's front page), plain pandas: every claim of the write-ups checked on
each machine's results (the verdict matrix), the GPU/CPU speedup of every write-up configuration as
published, predicted and measured (the headline chart's data), and the machines with results.

Each machine's verdicts rest on the runs an experiment page shows by default (core.store.runs.default_runs: the
latest complete run of each preset per machine). Where a claim needs a GPU, the write-up's GPU is predicted
from the machine's stand-in censuses when the machine is calibrated (core.predict.predictions)."""
import json
import re
import pandas as pd

from core import devices, experiments, published
from core.present import analysis
from core.model import hardware
from core.predict import predictions, uncertainty, writeups
from core.store import results, runs

FIGURE_META = ("id", "experiment", "figure", "quantity", "unit", "value", "device", "hardware", "source",
               "source_title", "note")  # the published frame's columns that are not a figure's parameters
MATRIX_COLUMNS = ["experiment", "write_up", "claim", "published", "machine_id", "machine", "outcome", "ours", "interval",
                  "leaning", "predicted_on"]
RATIO_COLUMNS = ["experiment", "figure", "quantity", "params", "setting", "ids", "ratio", "hardware", "stated"]
HEADLINE_COLUMNS = ["label", "ratio", "source", "series", "experiment", "setting", "hardware", "detail", "quality",
                    "lo", "hi"]
PUBLISHED_SERIES = "published (the write-up's hardware)"
PREDICTED_SERIES = "predicted on the write-up's hardware"
GPU_CLAIM = "needs a GPU"
NO_DATA_TEXT = "no data"
PREDICTED_COLUMN = "Predicted (the write-up's GPU)"


# -- which runs ---------------------------------------------------------------------------------------------
def shown_records(records: list[dict]) -> list[dict]:
    """The records the overview rests on: per experiment, the latest complete run of each preset on each
    machine (core.store.runs.default_runs), as the experiment pages show by default."""
    frame = results.runs_frame(records)
    if frame.empty:
        return []
    chosen = {run_id for _, part in frame.groupby("experiment") for run_id in runs.default_runs(part)}
    return [r for r in records if r["run_id"] in chosen]


def _labels(shown: list[dict]) -> dict[str, str]:
    """machine id -> its label (devices.label, as every page names it) for the machines of `shown`, in the
    order of their labels; two machines with one label are told apart by their ids."""
    found = {r["machine_id"]: devices.label(r["fingerprint"]) for r in shown}
    repeated = {label for label in found.values() if list(found.values()).count(label) > 1}
    named = {mid: f"{label} [{mid}]" if label in repeated else label for mid, label in found.items()}
    return dict(sorted(named.items(), key=lambda item: item[1]))


def gpu_measured(records: list[dict]) -> bool:
    """Whether any GPU (not the stand-in) has measured a point, in any run."""
    return any(row.get("status", "ok") == "ok" and devices.is_accelerator(row["device"])
               and not devices.is_stand_in(row["device"]) for r in records for row in r["rows"])


# -- the verdict matrix ---------------------------------------------------------------------------------------
def short_title(experiment: experiments.Presented) -> str:
    """An experiment's title up to its first colon: 'Iris MLP'."""
    return experiment.title.split(":")[0].strip()


def predicted_rows(experiment: experiments.Presented, records: list[dict], machine_id: str) -> pd.DataFrame:
    """The machine's stand-in points of `experiment` predicted on its write-up's GPU driven by the machine's
    CPU; empty when the machine is not calibrated or the catalogue does not know the write-up."""
    try:
        gpu = hardware.writeup_target(experiment.source)[0].gpu
        target = hardware.resolve(gpu.name, host=machine_id)
    except hardware.HardwareError:
        return pd.DataFrame()
    rows = predictions.standin_rows(records, experiment.name, target)
    return predictions.with_twin_metrics(rows[rows["point_status"] == "ok"],
                                         results.rows_frame(records, experiment.name), experiment)


def verdict_matrix(records: list[dict], predict: bool = True, here: str | None = None) -> pd.DataFrame:
    """One row per claim and machine (MATRIX_COLUMNS): the claim, its published figures (short), and on
    each machine with results the verdict's outcome and our finding in a sentence (`ours`). Where the claim needs
    a GPU and `predict`, one machine's verdict also carries the outcome the write-up's GPU is predicted to lean to,
    as the table shows it (predicted_cell): `here`'s (a machine id) where it is calibrated and has the experiment's
    results, else the first such machine's. A claim with no machine to check it on has one row with an empty
    machine."""
    shown = shown_records(records)
    named = _labels(shown)
    found = []
    for experiment in experiments.registry().values():
        figures = published.load(experiment.name)
        mine = {mid: [r for r in shown if r["machine_id"] == mid and r["experiment"] == experiment.name]
                for mid in named}
        chosen, guessed = _predicted_on_one(experiment, mine, here) if predict else (None, pd.DataFrame())
        on = guessed["device_name"].iloc[0].removesuffix(" (predicted)") if len(guessed) else ""
        for machine_id, label in named.items() or [(None, None)]:
            rows = results.rows_frame(mine.get(machine_id, []), experiment.name)
            predicted = guessed if machine_id == chosen else pd.DataFrame()
            for verdict in experiment.verdicts(rows, figures, predicted):
                found.append({"experiment": experiment.name, "write_up": short_title(experiment),
                              "claim": verdict.claim, "published": verdict.published, "machine_id": machine_id,
                              "machine": label, "outcome": verdict.outcome, "ours": ours_text(verdict),
                              "interval": verdict.interval if verdict.basis else "",
                              "leaning": verdict.leaning, "predicted_on": on if verdict.leaning else ""})
    return pd.DataFrame(found, columns=MATRIX_COLUMNS)


def _predicted_on_one(experiment: experiments.Presented, mine: dict[str, list[dict]],
                      here: str | None) -> tuple[str | None, pd.DataFrame]:
    """The machine whose results the write-up's GPU is predicted from (`here` first, then in `mine`'s order: the
    first with the experiment's results and a calibration) and its predicted rows; (None, empty) where none is.
    One machine, not each: the table shows one prediction per claim, and each costs three checks of it."""
    for machine_id in sorted(mine, key=lambda m: m != here):
        guessed = predicted_rows(experiment, mine[machine_id], machine_id) if mine[machine_id] else pd.DataFrame()
        if len(guessed):
            return machine_id, guessed
    return None, pd.DataFrame()


def ours_text(verdict: analysis.Verdict) -> str:
    """Our figure in a sentence: the first sentence of what the check found, when it found something."""
    if verdict.outcome in (analysis.NEEDS_GPU, analysis.NO_DATA) or not verdict.finding:
        return ""
    sentences = re.split(r"(?<=\.)\s+(?=[A-Z])", verdict.finding.strip())
    said = verdict.outcome == analysis.TOO_CLOSE and len(sentences) > 1  # the outcome and its interval say it
    return sentences[1 if said else 0]


def cell_text(entry: pd.Series, marks: dict[str, str], unknown_mark: str = "") -> str:
    """A machine's cell of the matrix: the verdict's mark and outcome, with our finding where there is one."""
    mark = marks.get(entry["outcome"], unknown_mark)
    if entry["outcome"] == analysis.NEEDS_GPU:
        return f"{mark} {GPU_CLAIM}".strip()
    if entry["ours"]:
        said = not entry.get("interval") or entry["interval"] in entry["ours"]  # most findings state their interval
        decided_on = "" if said else f" ({entry['interval']})"
        return f"{mark} **{entry['outcome']}**{decided_on}: {entry['ours']}".strip()
    return f"{mark} {NO_DATA_TEXT if entry['outcome'] == analysis.NO_DATA else entry['outcome']}".strip()


def predicted_cell(entries: pd.DataFrame, marks: dict[str, str]) -> str:
    """The predicted leaning of a claim on the write-up's GPU, from the machine verdict_matrix predicted on; ''
    where it has none."""
    leaning = entries[entries["leaning"] != ""]
    if leaning.empty:
        return ""
    entry = leaning.iloc[0]
    return f"{marks.get(entry['leaning'], '')} {entry['leaning']} ({entry['predicted_on']})".strip()


def matrix_table(matrix: pd.DataFrame, marks: dict[str, str], unknown_mark: str = "", here: str | None = None,
                 ) -> pd.DataFrame:
    """The matrix as people read it: one row per claim (write-up, claim, published figure), one column per
    machine holding cell_text (`here`, a machine id, first) and, where a claim needs a GPU and a machine is
    calibrated, PREDICTED_COLUMN (predicted_cell: the machine the matrix predicted on). The write-up is named on its
    first claim only."""
    claims = matrix.drop_duplicates(["experiment", "claim"])[["experiment", "write_up", "claim", "published"]]
    keys = list(zip(claims["experiment"], claims["claim"]))
    table = pd.DataFrame({"Write-up": claims["write_up"].where(~claims["experiment"].duplicated(), ""),
                          "Claim": claims["claim"], "Published": claims["published"].replace("", "in words")})
    measured = matrix[matrix["machine_id"].notna()]
    order = measured.sort_values("machine_id", key=lambda ids: ids != here, kind="stable")
    for machine in dict.fromkeys(order["machine"]):
        on = measured[measured["machine"] == machine].set_index(["experiment", "claim"])
        table[machine] = [cell_text(on.loc[key], marks, unknown_mark) if key in on.index else "" for key in keys]
    if (measured["leaning"] != "").any():
        by_claim = measured.groupby(["experiment", "claim"], sort=False)
        table[PREDICTED_COLUMN] = [predicted_cell(by_claim.get_group(key), marks) or "—" for key in keys]
    return table.reset_index(drop=True)


def markdown_table(table: pd.DataFrame) -> str:
    """A frame as a GitHub-flavoured Markdown table (cells wrap, unlike a data frame's), '|' escaped."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(c) for c in table.columns) + " |", "|" + " --- |" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


# -- the headline: GPU/CPU speedups at the write-ups' configurations -----------------------------------------
def settings_of(figures: pd.DataFrame) -> pd.Series:
    """Each published figure's parameters (the columns beside FIGURE_META that it sets), as a dict."""
    params = [c for c in figures.columns if c not in FIGURE_META]
    return figures.apply(lambda row: {k: _plain(row[k]) for k in params if pd.notna(row[k])}, axis=1)


def setting_text(params: dict) -> str:
    """'batch_size 512', 'size 200, torch resident', or 'as published' for a figure without parameters."""
    return ", ".join(str(v) if k == "variant" else f"{k} {v}" for k, v in params.items()) or "as published"


def published_ratios(figures: pd.DataFrame) -> pd.DataFrame:
    """One row per write-up configuration with a GPU/CPU speedup: a speedup figure taken as it is, or the
    CPU time over the GPU time of the same figure and parameters (RATIO_COLUMNS; `ids`: device -> figure
    id, `stated`: the figures as published, short)."""
    if figures.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    figures = figures.assign(params=settings_of(figures))
    figures = figures.assign(key=figures["params"].map(lambda p: json.dumps(p, sort_keys=True)))
    found = []
    for _, part in figures.groupby(["experiment", "figure", "key"], sort=False):
        values = part.set_index("device")["value"]
        first = part.iloc[0]
        if (part["unit"] == "x").all() and str(first["quantity"]).startswith("speedup"):
            ratio = float(part["value"].iloc[0])
        elif {"CPU", "GPU"} <= set(values.index) and part["unit"].nunique() == 1:
            ratio = float(values["CPU"] / values["GPU"])
        else:
            continue  # one device's time alone is no speedup
        found.append({"experiment": first["experiment"], "figure": first["figure"], "quantity": first["quantity"],
                      "params": first["params"], "setting": setting_text(first["params"]),
                      "ids": dict(zip(part["device"], part["id"])), "ratio": ratio,
                      "hardware": " / ".join(dict.fromkeys(part["hardware"])),
                      "stated": analysis.published_short(part)})
    return pd.DataFrame(found, columns=RATIO_COLUMNS)


def headline(records: list[dict], predicted: pd.DataFrame | None = None) -> pd.DataFrame:
    """The GPU/CPU speedup (CPU time / GPU time: above 1 the GPU is faster) of every write-up configuration
    with one (HEADLINE_COLUMNS): published; predicted on the write-up's hardware where `predicted` (a
    core.predict.writeups table) holds both its times, with the range the model's error on speedups gives it (lo, hi:
    the saved speedup band over every regime, as the table keeps no regime); measured where a GPU measured the
    configuration's points."""
    shown = shown_records(records)
    band = uncertainty.band_for(uncertainty.load(), uncertainty.SPEEDUP, "any")
    found = []
    for experiment in experiments.registry().values():
        ratios = published_ratios(published.load(experiment.name))
        rows = analysis.latest(results.rows_frame(shown, experiment.name))
        for _, figure in ratios.iterrows():
            common = {"label": f"{experiment.name} · {figure['setting']}", "experiment": experiment.title,
                      "setting": figure["setting"], "quality": ""}
            found.append(common | {"ratio": figure["ratio"], "source": "published", "series": PUBLISHED_SERIES,
                                   "hardware": figure["hardware"], "detail": figure["stated"]})
            guess = _predicted_ratio(figure, predicted)
            if guess:
                found.append(common | {"source": "predicted", "series": PREDICTED_SERIES, **_ranged(guess, band)})
            found += [common | {"source": "measured", **m} for m in _measured_ratios(figure, rows)]
    return pd.DataFrame(found, columns=HEADLINE_COLUMNS)


def _predicted_ratio(figure: pd.Series, predicted: pd.DataFrame | None) -> dict:
    """The predicted CPU time over the predicted GPU time of a configuration's two figures, or its published
    speedup's prediction, with the hardware."""
    ids = figure["ids"]
    if predicted is None:
        return {}
    by_id = predicted.set_index("id")
    if str(figure["quantity"]).startswith("speedup"):
        return _predicted_speedup(by_id, ids.get("GPU"))
    if not {"CPU", "GPU"} <= set(ids):
        return {}
    if not {ids["CPU"], ids["GPU"]} <= set(by_id.index):
        return {}
    cpu, gpu = by_id.loc[ids["CPU"]], by_id.loc[ids["GPU"]]
    if not (pd.notna(cpu["predicted"]) and pd.notna(gpu["predicted"]) and gpu["predicted"] > 0):
        return {}
    return {"ratio": float(cpu["predicted"] / gpu["predicted"]), "hardware": gpu["target"],
            "detail": f"predicted CPU {cpu['predicted']:.3g} s / GPU {gpu['predicted']:.3g} s (a model, not a "
                      "measurement)"}


def _ranged(guess: dict, band: uncertainty.Band | None) -> dict:
    """A predicted speedup with its likely range from the speedup band (none without one), said in its detail."""
    if band is None:
        return guess
    lo, hi = band.range(guess["ratio"])
    return guess | {"lo": lo, "hi": hi, "detail": f"{guess['detail']}; {uncertainty.speedup_range_text(lo, hi)}"}


def _predicted_speedup(by_id: pd.DataFrame, figure_id: str | None) -> dict:
    if figure_id not in by_id.index or pd.isna(by_id.loc[figure_id, "predicted"]):
        return {}
    found = by_id.loc[figure_id]
    return {"ratio": float(found["predicted"]), "hardware": found["target"],
            "detail": f"predicted speedup {found['predicted']:.3g}x: {found['how']} (a model, not a measurement)"}


def _measured_ratios(figure: pd.Series, rows: pd.DataFrame) -> list[dict]:
    """Per machine and GPU: the CPU time over the GPU time (per unit) at the configuration's points, the
    median where several points match (the write-up's sizes are larger than ours)."""
    matching = _configuration_points(figure, rows)
    if matching.empty:
        return []
    gpu = matching[analysis.on_accelerator(matching)]
    variant = _gpu_variant(figure, gpu)
    if variant:
        gpu = gpu[gpu["variant"] == variant]
    cpu = matching[matching["device"] == "cpu"]
    found = []
    for (machine, name), part in gpu.groupby(["machine", "device_name"], sort=False):
        ratios, against, doubts = [], set(), set()
        for _, row in part.iterrows():
            baseline = _cpu_baseline(row, cpu, figure["quantity"])
            if baseline is not None:
                ratios.append(baseline["per_unit_s"] / row["per_unit_s"])
                against.add(baseline["variant"])
                doubts |= {_doubt(row), _doubt(baseline)} - {""}
        if ratios:
            found.append({"ratio": float(pd.Series(ratios).median()), "series": f"measured on {name}",
                          "quality": ", ".join(sorted(doubts)),
                          "hardware": machine, "detail": f"median of {len(ratios)} point(s): {variant or 'each'} "
                                                         f"variant on the GPU, {', '.join(sorted(against))} on the CPU"})
    return found


def _doubt(row: pd.Series) -> str:
    """Why a measured point is to be read with care ('noisy', 'one sample'), or ''."""
    if row.get("n") == 1:
        return "one sample"
    return "noisy" if row.get("noisy") is True else ""


def _configuration_points(figure: pd.Series, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows at the points of a write-up configuration: those with its published parameters and, of its
    replica's other parameters (core.predict.writeups), each one that some measured point has."""
    if rows.empty:
        return rows
    points = rows["point"].map(json.loads)
    published_params = {k: v for k, v in figure["params"].items() if k != "variant"}
    chosen = points.map(lambda p: all(p.get(k, v) == v for k, v in published_params.items()))
    replica = _replica(figure)
    for key, value in (replica.params.items() if replica else ()):
        narrower = chosen & points.map(lambda p: p.get(key) == value)
        if key not in published_params and narrower.any():
            chosen = narrower
    return rows[chosen]


def _replica(figure: pd.Series) -> writeups.Replica | None:
    """How Crossover replicates a configuration's GPU figure (core.predict.writeups), where it declares one."""
    found = writeups.declarations(experiments.registry()).get(figure["ids"].get("GPU", ""))
    return found if isinstance(found, writeups.Replica) else None


def _gpu_variant(figure: pd.Series, gpu: pd.DataFrame) -> str | None:
    """The variant the write-up timed: the figure's own, its replica's, else 'as written' where the
    experiment has it; None: every variant."""
    replica = _replica(figure)
    if figure["params"].get("variant"):
        return figure["params"]["variant"]
    if replica:
        return replica.variant
    return "as written" if "as written" in set(gpu["variant"]) else None


def _cpu_baseline(row: pd.Series, cpu: pd.DataFrame, quantity: str) -> pd.Series | None:
    """The CPU point a GPU point is set against: the variant a 'speedup_over_<variant>' figure names, else
    the same variant, else the fastest CPU variant at that point (the same machine and configuration)."""
    same = cpu[(cpu["machine_id"] == row["machine_id"]) & (cpu["config_id"] == row["config_id"])
               & (cpu["point"] == row["point"])]
    named = quantity.removeprefix("speedup_over_") if quantity.startswith("speedup_over_") else row["variant"]
    for choice in (same[same["variant"] == named], same[same["variant"] == row["variant"]], same):
        if len(choice):
            return choice.sort_values("per_unit_s").iloc[0]
    return None


# -- the machines with results ---------------------------------------------------------------------------------
def machines_table(records: list[dict]) -> pd.DataFrame:
    """One row per machine with any run: its id and label, the experiments with a complete run, the complete runs per
    preset (smoke runs apart), the runs set apart (smoke, cancelled, failed, interrupted) and the latest start."""
    frame = results.runs_frame(records)
    columns = ["machine_id", "Machine", "Experiments", "Complete runs", "Set apart", "Latest run"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    found = []
    for (machine_id, machine), part in frame.groupby(["machine_id", "machine"], sort=False):
        complete = part[part["status"] == "complete"]
        counted = complete[complete["preset"] != "smoke"]
        apart = pd.concat([complete.loc[complete["preset"] == "smoke", "preset"],
                           part.loc[part["status"] != "complete", "status"].map(runs.status_text)])
        found.append({"machine_id": machine_id, "Machine": machine, "Experiments": complete["experiment"].nunique(),
                      "Complete runs": _counts(counted["preset"]) or "none",
                      "Set apart": _counts(apart) or "none",
                      "Latest run": runs.started_text(part["started"].max())})
    return pd.DataFrame(found, columns=columns).sort_values("Machine", kind="stable").reset_index(drop=True)


def _counts(values: pd.Series) -> str:
    """'quick 6, paper 1': how many of each value."""
    return ", ".join(f"{name} {count}" for name, count in values.value_counts(sort=False).items())


def _plain(value):
    """A figure's parameter as its JSON form has it (whole numbers as int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def verdicts_here(records: list[dict], names: list[str] = None) -> list[tuple[str, analysis.Verdict]]:
    """(experiment, verdict) for every claim of `names` (every experiment), from this machine's records alone."""
    here = devices.fingerprint()["machine_id"]
    found = []
    for name in names or list(experiments.registry()):
        rows = results.rows_frame(records, name)
        rows = rows[rows["machine_id"] == here] if len(rows) else rows
        found += [(name, verdict) for verdict in experiments.get(name).verdicts(rows, published.load(name))]
    return found


def verdict_line(verdict: analysis.Verdict) -> str:
    """'reproduced (rests on measurements; 2.30x (95% CI 2.28–2.32x)): <claim>', and what it found, or why nothing."""
    basis = f"rests on {'measurements' if verdict.basis == 'measured' else 'an estimate'}; " if verdict.basis else ""
    return f"{verdict.outcome} ({basis}{verdict.interval or 'no figure'}): {verdict.claim}: {verdict.finding}"
