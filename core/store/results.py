"""The results store: one JSON record per run under results/<machine-id>/, written atomically after
every point, and loaded tolerantly into pandas.

What is loaded: the regular files named *.json directly inside a machine folder (a folder of the results
folder), each at most MAX_RECORD_BYTES and valid against its schema (core.store.record_schema). Anything else
there (a symbolic link, even to a record; a named pipe; a device; a folder named *.json; a machine folder
that is a symbolic link; a file over the cap; a file that is not JSON or fails the schema) is skipped with
a warning naming it and why; hidden names (temporary files, logs, the lock) are never records. A run id is
RUN_ID_PATTERN, and a run never overwrites another run's record."""
from __future__ import annotations  # pandas is imported where a frame is built: calibrate's start skips it

import hashlib
import json
import numbers
import re
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path

from core import devices, settings, versions
from core.store import files, record_schema, runlock
from core.store.record_schema import DEFAULT_THREADS
from core.params import ConfigError, shown

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)   # schema 1: no unit, code version or environment; threads among the metrics
STATUSES = record_schema.STATUSES
MAX_RECORD_BYTES = 50_000_000   # 50 MB: a record over this is skipped unread (a quick run's is under 0.1 MB)
# A run id names a file and a folder in the machine folder: never a path, a hidden name or a second suffix.
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
RUN_ID_ALLOWED = "1 to 100 letters, digits, '_' or '-', the first a letter or digit (no '.', '/' or space)"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(experiment: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{experiment}-{stamp}-{uuid.uuid4().hex[:6]}"


def check_run_id(run_id: str) -> str:
    """`run_id` when it matches RUN_ID_PATTERN, else ConfigError naming what is allowed."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise ConfigError("run-id", f"{shown(run_id)} is not a run id; allowed: {RUN_ID_ALLOWED}")
    return run_id


class RecordWriter:
    """Builds one run's record and rewrites it atomically at every change. `run_id` must match
    RUN_ID_PATTERN (ConfigError); `start` refuses an id whose record exists, and every write refuses
    on a read-only instance (ReadOnlyError)."""

    def __init__(self, experiment: str, preset: str, config: dict, device_names: list[str],
                 run_id: str = None, results_dir: Path = None):
        fp = devices.fingerprint()
        self.record = {
            "schema": SCHEMA_VERSION, "run_id": check_run_id(new_run_id(experiment) if run_id is None else run_id),
            "experiment": experiment, "preset": preset, "variants": list(config.get("variants", ())),
            "devices": list(device_names), "config": config, "machine_id": fp["machine_id"],
            "fingerprint": fp, "code_version": versions.code_version(), "environment": versions.environment(),
            "started": now(), "ended": None, "status": "running",
            "planned_points": 0, "rows": [], "standin": [], "error": None,
        }
        folder = (results_dir or settings.results_dir()) / fp["machine_id"]
        self.path = folder / f"{self.record['run_id']}.json"

    def start(self, planned_points: int) -> None:
        """Create the record, never over an existing one, after removing leftover temporary files."""
        settings.require_writable("writing results")
        if planned_points > record_schema.MAX_ROWS:
            raise ConfigError("points", f"{planned_points:,} planned; allowed: at most {record_schema.MAX_ROWS:,} "
                                        "points in a run (a record holds no more)")
        files.make_folder(self.path.parent)
        files.remove_leftovers(self.path.parent)
        self.record["planned_points"] = planned_points
        try:  # created whole and exclusively (never through a symbolic link); rewritten atomically from here on
            files.create_atomic(self.path, files.json_bytes(self.record))
        except FileExistsError:
            raise ConfigError("run-id", f"a record of run {shown(self.record['run_id'])} already exists "
                                        f"({self.path}); a record is never overwritten: use another run id") from None

    def add(self, row: dict) -> None:
        """Append a row; a parameter or metric named like a column of the rows frame, or a metric named
        like a parameter, is refused."""
        settings.require_writable("writing results")
        params, metrics = set(row.get("params", {})), set(row.get("metrics", {}))
        clashes = sorted(((params | metrics) & set(BASE_COLUMNS)) | (params & metrics))
        if clashes:
            raise ValueError(f"row of {row.get('variant')} on {row.get('device')}: parameter or metric name(s) "
                             f"{clashes} would hide the row's own column(s); rename them")
        self.record["rows"].append(row)
        files.write_atomic(self.path, self.record)

    def plan_standins(self, planned: int) -> None:
        """Say how many stand-in censuses the run will take (none on GPUs alone), before it takes them: fewer in
        the record means it stopped among them."""
        settings.require_writable("writing results")
        self.record["standins_planned"] = planned
        files.write_atomic(self.path, self.record)

    def add_standin(self, entry: dict) -> None:
        """Append the stand-in census of a point a GPU would run (core.measure.standin)."""
        settings.require_writable("writing results")
        self.record["standin"].append(entry)
        files.write_atomic(self.path, self.record)

    def finish(self, status: str, error: str = None) -> None:
        settings.require_writable("writing results")
        assert status in STATUSES
        self.record.update(status=status, ended=now(), error=error)
        files.write_atomic(self.path, self.record)


def read_record(path: Path) -> dict:
    """One record, or ValueError saying why the file is not a Crossover record: not a regular file (a
    symbolic link is never followed, a pipe never waited on), over MAX_RECORD_BYTES, gone, not JSON, or
    failing its schema (the field named)."""
    return parse_record(*files.read_regular_file(Path(path), MAX_RECORD_BYTES))


def parse_record(text: bytes, version: tuple | None = None) -> dict:
    """A record from its bytes, or ValueError saying why they are not one: not JSON, not a Crossover record
    of a readable schema, or failing its schema (the field named). `version` (a file's, from
    read_regular_file) lets a file unchanged since its last check skip the schema check."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # ValueError: bad JSON, bad UTF-8, an int too long to read
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"not a Crossover record of schema {' or '.join(map(str, READABLE_SCHEMAS))}")
    problem = record_schema.problem(data, data["schema"]) if version is None else _schema_problem(data, version)
    if problem:
        raise ValueError(f"field {problem}")
    return data


# Each version of a file is checked against the schema once (a check takes about a millisecond a row).
_SCHEMA_PROBLEMS: dict[tuple, str | None] = {}


def _schema_problem(data: dict, version: tuple) -> str | None:
    if version not in _SCHEMA_PROBLEMS:
        if len(_SCHEMA_PROBLEMS) >= 4096:
            _SCHEMA_PROBLEMS.clear()
        _SCHEMA_PROBLEMS[version] = record_schema.problem(data, data["schema"])
    return _SCHEMA_PROBLEMS[version]


def record_paths(results_dir: Path = None) -> list[Path]:
    """Where records may be, sorted: every `*.json` name directly inside a machine folder, whatever it
    turns out to be (read_record checks), and every machine folder that is a symbolic link (listed itself,
    never entered). Hidden names are left out: temporary files, the logs, the lock's description. A
    folder that vanishes or cannot be listed is left out."""
    folder = results_dir or settings.results_dir()
    paths = []
    for machine in files.entries(folder):
        if machine.name.startswith(".") or not machine.is_dir():
            continue
        if machine.is_symlink():
            paths.append(Path(machine.path))
            continue
        paths += [Path(entry.path) for entry in files.entries(Path(machine.path))
                  if entry.name.endswith(".json") and not entry.name.startswith(".")]
    return sorted(paths)


STANDINS_CUT = "stopped during the stand-in censuses, after every point was measured"


def has_every_standin(record: dict) -> bool:
    """Whether a complete run took every stand-in census it planned (none when it measured GPUs alone). A record
    that does not say what it planned (from before `standins_planned`) and stopped after its last point, which
    load_records reads as complete, saying so in its error, took some only."""
    planned = record.get("standins_planned")
    if planned is None:
        return not (record.get("error") or "").startswith(STANDINS_CUT)
    return len(record.get("standin") or []) >= planned


def _measured_in_full(record: dict) -> bool:
    rows = record["rows"]
    return bool(record.get("planned_points")) and len(rows) >= record["planned_points"] and any(
        row.get("status", "ok") == "ok" for row in rows)


def load_records(results_dir: Path = None) -> list[dict]:
    """Every readable record; anything else where records are kept is skipped with a warning naming it
    and why (see the module's docstring). A record still marked running that no live run holds was
    interrupted: it reads as partial. One stopped (interrupted or cancelled) after its last point, in its
    stand-in censuses, reads as complete, with fewer stand-ins than it planned (one from before it said what it
    planned, saying so in its error): the stand-ins feed predictions, not measurements."""
    folder = results_dir or settings.results_dir()
    active = {}  # machine folder -> the run id its lock holds (each machine of a shared folder has its own)
    records = []
    for path in record_paths(folder):
        try:
            record = read_record(path)
        except ValueError as e:
            warnings.warn(f"skipping {path}: {e}", stacklevel=2)
            continue
        machine = path.parent.name
        if record["status"] == "running" and machine not in active:
            active[machine] = (runlock.holder(folder, machine) or {}).get("run_id")
        if record["status"] == "running" and record["run_id"] != active[machine]:
            record["status"] = "partial"
        records.append(settled(record))
    return records


def settled(record: dict) -> dict:
    """The record as it is read once no run holds it: one stopped (interrupted or cancelled) after its last point
    reads as complete, one from before it said what stand-ins it planned saying so in its error. A bundle carries
    records so read, and an import compares them so."""
    if record["status"] in ("partial", "cancelled") and _measured_in_full(record):
        taken = len(record.get("standin") or [])
        record.update(status="complete", error=None if record.get("standins_planned") is not None else
                      f"{STANDINS_CUT} ({taken} taken)")
    return record


def record_summary(record: dict) -> dict:
    code = record.get("code_version") or {}
    return {"run_id": record["run_id"], "experiment": record["experiment"], "preset": record.get("preset"),
            "status": record["status"], "machine_id": record.get("machine_id"),
            "machine": devices.label(record["fingerprint"]), "started": record.get("started"),
            "ended": record.get("ended"), "points": len(record["rows"]),
            "planned_points": record.get("planned_points"), "config_id": config_id(record.get("config", {})),
            "code_version": code.get("commit") or code.get("package"), "devices": measured_devices(record)}


def measured_devices(record: dict) -> list[str]:
    """The devices a run measured: its record's list, else (optional in a record) its rows' devices."""
    return list(record.get("devices") or dict.fromkeys(row["device"] for row in record["rows"]))


def config_id(config: dict) -> str:
    """A short hash of what a run measured (its configuration, less the choice of variants): runs with
    the same id measured their common points the same way."""
    measured = {k: v for k, v in config.items() if k != "variants"}
    return hashlib.sha256(json.dumps(measured, sort_keys=True, default=files.jsonable).encode()).hexdigest()[:10]


def runs_frame(records: list[dict]) -> pd.DataFrame:
    import pandas as pd  # imported here: 0.5 s of every command's start otherwise (calibrate builds no frame)
    return pd.DataFrame([record_summary(r) for r in records])


def latest_complete(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The latest complete run for each value of `keys` and each device it measured, as rows of keys, device
    and run_id: a run of the CPU alone after one of the GPU alone leaves the GPU's run the latest for the GPU.
    `frame` has a row per run (runs_frame: the devices it measured) or per point (rows_frame: its device)."""
    if frame.empty:
        import pandas as pd  # as in runs_frame
        return pd.DataFrame(columns=[*keys, "device", "run_id"])
    return latest_complete_rows(frame, keys)[[*keys, "device", "run_id"]]


def latest_complete_rows(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rows of `frame` (runs_frame's or rows_frame's) from the latest complete run for each value of `keys` and
    each device: the one rule that chooses runs (latest_complete, runs.default_runs, analysis.latest)."""
    complete = frame[frame["status"] == "complete"]
    if "device" not in complete:
        complete = complete.assign(device=complete["devices"]).explode("device")
    order = complete["started"].reset_index(drop=True).sort_values(kind="stable", na_position="first").index
    chosen = complete[[*keys, "device"]].iloc[order]  # the keys alone: a wide frame's duplicated() walks every column
    return complete.iloc[order[~chosen.duplicated(keep="last").to_numpy()]]


# A row's census and breakdown (per sample) as columns of the rows frame: record key -> column. Where the profiler
# counted the GPU's kernels (a census's profiler_kernels), census_kernels is its count, and census_kernels_assumed the
# census's own (the kernels its rules assume; census_kernel_difference, the profiler's less the census's): counted
# kernels replace assumed ones (census_read).
CENSUS_COLUMNS = {k: f"census_{k}" for k in ("operations", "kernels", "kernels_assumed", "syncs", "copies", "h2d_bytes",
                                             "d2h_bytes", "flops", "bytes_moved", "profiler_kernels",
                                             "kernel_difference", "top_by_count", "top_by_flops")}


def census_read(census: dict) -> dict:
    """A row's census as a reader takes it: "kernels" the profiler's count where it took one ("profiler_kernels"),
    "kernels_assumed" the census's count (the rules' assumption where the profiler counted, else the count itself)."""
    found = dict(census)
    if "kernels" in census:
        found["kernels_assumed"] = census["kernels"]
        if census.get("profiler_kernels") is not None:
            found["kernels"] = census["profiler_kernels"]
    return found
BREAKDOWN_COLUMNS = {f"{part}_s": f"time_{part}_s" for part in ("compute", "copies", "sync", "loading", "host")} | {
    "profiled_s": "time_profiled_s", "adds_up": "breakdown_adds_up", "trace": "breakdown_trace",
    "table": "breakdown_table"}

BASE_COLUMNS = ["run_id", "experiment", "preset", "status", "machine_id", "machine", "started", "ended", "points",
                "planned_points", "config_id", "code_version", "device", "device_name", "variant", "point",
                "point_status", "error", "unit", "per_call", "per_sample", "torch_threads", "threads_setting",
                "tf32_matmul", "tf32_cudnn", "cudnn_benchmark", "median_s", "per_unit_s", "iqr_s",
                "noisy", "n", "cold", "stopped", "half_width", "samples_s", "warmup_samples_s", *CENSUS_COLUMNS.values(),
                *BREAKDOWN_COLUMNS.values(), "census_note", "breakdown_note"]


def per_unit(seconds, per_call):
    """The seconds of one unit ("per epoch") from a sample's seconds, a sample holding `per_call` units (unknown:
    one): a number, or pandas Series of each. The one place a time is divided by its units."""
    if per_call is None or isinstance(per_call, numbers.Number):
        return None if seconds is None else seconds / (per_call or 1)
    return seconds / per_call.fillna(1)


def rows_frame(records: list[dict], experiment: str = None) -> pd.DataFrame:
    """One row per measured point, with its run's metadata; swept parameters and metrics become
    columns of their own (a metric never over a parameter, neither over a base column), raw samples are kept. Empty, it still has the base
    columns."""
    import pandas as pd  # as in runs_frame
    flat = []
    for record in records:
        if experiment and record["experiment"] != experiment:
            continue
        meta = record_summary(record)
        for row in record["rows"]:
            params, metrics = row.get("params", {}), row.get("metrics", {})
            samples = row.get("samples")
            base = {**meta, "device": row["device"], "device_name": device_name(record, row["device"]),
                    "variant": row["variant"], "point": point_key(params),
                    "point_status": row.get("status", "ok"), "error": row.get("error"), "unit": row.get("unit"),
                    "per_call": row.get("per_call"), "per_sample": _per_sample(row),
                    "torch_threads": row.get("torch_threads", metrics.get("torch_threads")),
                    "threads_setting": row.get("threads_setting", DEFAULT_THREADS), "tf32_matmul": row.get("tf32_matmul"),
                    "tf32_cudnn": row.get("tf32_cudnn"), "cudnn_benchmark": row.get("cudnn_benchmark"),
                    "median_s": row.get("median"), "per_unit_s": per_unit(row.get("median"), row.get("per_call")),
                    "iqr_s": row.get("iqr"), "noisy": _noisy(row),
                    "n": row.get("n", len(samples) if samples else None), "cold": row.get("cold"),
                    "stopped": row.get("stopped"), "half_width": row.get("half_width"), "samples_s": samples, "warmup_samples_s": row.get("warmup_samples"),
                    **_inspection(row)}
            flat.append({**base, **params, **metrics} | params | base)
    return pd.DataFrame(flat) if flat else pd.DataFrame(columns=BASE_COLUMNS)


def point_key(params: dict) -> str:
    """The `point` column: a point's swept parameters as one comparable text."""
    return json.dumps(params, sort_keys=True)


def point_text(params: dict) -> str:
    """A point's swept parameters for people: 'batch_size=16 rows=16384'."""
    return " ".join(f"{k}={v}" for k, v in params.items())


def _inspection(row: dict) -> dict:
    """The census and breakdown columns; `*_note` says why one is missing (skipped, failed)."""
    census, parts = census_read(row.get("census") or {}), row.get("breakdown") or {}
    return ({column: census.get(key) for key, column in CENSUS_COLUMNS.items()}
            | {column: parts.get(key) for key, column in BREAKDOWN_COLUMNS.items()}
            | {"census_note": census.get("skipped") or census.get("error"),
               "breakdown_note": parts.get("skipped") or parts.get("error")})


def call_text(unit: str, per_call: int) -> str:
    """What one sample is, in words: 'one epoch', '2,000 epochs', '3 x (training run)'."""
    if per_call == 1:
        return f"one {unit}"
    return f"{per_call:,} {unit}s" if unit.isalpha() else f"{per_call:,} x ({unit})"


def _per_sample(row: dict) -> str | None:
    return call_text(row["unit"], row.get("per_call", 1)) if row.get("unit") else None


def _noisy(row: dict) -> bool | None:
    """Schema 1 called a single sample quiet; it is unknown."""
    samples = row.get("samples")
    return None if samples is not None and len(samples) < 2 else row.get("noisy")


def device_name(record: dict, device: str) -> str:
    fp = record["fingerprint"]
    if device == "cpu":
        return fp["cpu_model"]
    for gpu in fp.get("gpus", []):
        if gpu["device"] == device:
            return gpu["name"]
    return device
