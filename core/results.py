"""The results store: one JSON record per run under results/<machine-id>/, written atomically after
every point, and loaded tolerantly into pandas."""
import hashlib
import json
import os
import tempfile
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from core import devices, runlock, settings, versions
from core.timing import call_text

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)   # schema 1: no unit, code version or environment; threads among the metrics
STATUSES = ("running", "complete", "partial", "failed", "cancelled")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(experiment: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{experiment}-{stamp}-{uuid.uuid4().hex[:6]}"


def write_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=_jsonable)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a hosted, read-only view may run as another user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jsonable(value):
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


class RecordWriter:
    """Builds one run's record and rewrites it atomically at every change."""

    def __init__(self, experiment: str, preset: str, config: dict, device_names: list[str],
                 run_id: str = None, results_dir: Path = None):
        fp = devices.fingerprint()
        self.record = {
            "schema": SCHEMA_VERSION, "run_id": run_id or new_run_id(experiment),
            "experiment": experiment, "preset": preset, "variants": list(config.get("variants", ())),
            "devices": list(device_names), "config": config, "machine_id": fp["machine_id"],
            "fingerprint": fp, "code_version": versions.code_version(), "environment": versions.environment(),
            "started": now(), "ended": None, "status": "running",
            "planned_points": 0, "rows": [], "error": None,
        }
        folder = (results_dir or settings.results_dir()) / fp["machine_id"]
        self.path = folder / f"{self.record['run_id']}.json"

    def start(self, planned_points: int) -> None:
        self.record["planned_points"] = planned_points
        write_atomic(self.path, self.record)

    def add(self, row: dict) -> None:
        """Append a row; a parameter or metric named like a column of the rows frame, or a metric named
        like a parameter, is refused."""
        params, metrics = set(row.get("params", {})), set(row.get("metrics", {}))
        clashes = sorted(((params | metrics) & set(BASE_COLUMNS)) | (params & metrics))
        if clashes:
            raise ValueError(f"row of {row.get('variant')} on {row.get('device')}: parameter or metric name(s) "
                             f"{clashes} would hide the row's own column(s); rename them")
        self.record["rows"].append(row)
        write_atomic(self.path, self.record)

    def finish(self, status: str, error: str = None) -> None:
        assert status in STATUSES
        self.record.update(status=status, ended=now(), error=error)
        write_atomic(self.path, self.record)


def read_record(path: Path) -> dict:
    """One record, or ValueError saying why the file is not a Crossover record."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"unreadable ({e})") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"not a Crossover record of schema {' or '.join(map(str, READABLE_SCHEMAS))}")
    missing = {"run_id", "experiment", "status", "rows", "fingerprint"} - data.keys()
    if missing:
        raise ValueError(f"missing fields {sorted(missing)}")
    return data


def load_records(results_dir: Path = None) -> list[dict]:
    """Every readable record; an unreadable or foreign file is skipped with a warning naming it.
    A record still marked running that no live run holds was interrupted: it reads as partial."""
    folder = results_dir or settings.results_dir()
    active = (runlock.holder(folder) or {}).get("run_id")
    records = []
    for path in sorted(folder.glob("*/*.json")):
        try:
            record = read_record(path)
        except ValueError as e:
            warnings.warn(f"skipping {path}: {e}", stacklevel=2)
            continue
        if record["status"] == "running" and record["run_id"] != active:
            record["status"] = "partial"
        records.append(record)
    return records


def record_summary(record: dict) -> dict:
    code = record.get("code_version") or {}
    return {"run_id": record["run_id"], "experiment": record["experiment"], "preset": record.get("preset"),
            "status": record["status"], "machine_id": record.get("machine_id"),
            "machine": devices.label(record["fingerprint"]), "started": record.get("started"),
            "ended": record.get("ended"), "points": len(record["rows"]),
            "planned_points": record.get("planned_points"), "config_id": config_id(record.get("config", {})),
            "code_version": code.get("commit") or code.get("package")}


def config_id(config: dict) -> str:
    """A short hash of what a run measured (its configuration, less the choice of variants): runs with
    the same id measured their common points the same way."""
    measured = {k: v for k, v in config.items() if k != "variants"}
    return hashlib.sha256(json.dumps(measured, sort_keys=True, default=_jsonable).encode()).hexdigest()[:10]


def runs_frame(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([record_summary(r) for r in records])


BASE_COLUMNS = ["run_id", "experiment", "preset", "status", "machine_id", "machine", "started", "ended", "points",
                "planned_points", "config_id", "code_version", "device", "device_name", "variant", "point",
                "point_status", "error", "unit", "per_call", "per_sample", "torch_threads", "median_s", "iqr_s",
                "noisy", "n", "cold", "samples_s", "warmup_samples_s"]


def rows_frame(records: list[dict], experiment: str = None) -> pd.DataFrame:
    """One row per measured point, with its run's metadata; swept parameters and metrics become
    columns of their own (a metric never over a parameter, neither over a base column), raw samples are kept. Empty, it still has the base
    columns."""
    flat = []
    for record in records:
        if experiment and record["experiment"] != experiment:
            continue
        meta = record_summary(record)
        for row in record["rows"]:
            params, metrics = row.get("params", {}), row.get("metrics", {})
            samples = row.get("samples")
            base = {**meta, "device": row["device"], "device_name": device_name(record, row["device"]),
                    "variant": row["variant"], "point": json.dumps(params, sort_keys=True),
                    "point_status": row.get("status", "ok"), "error": row.get("error"), "unit": row.get("unit"),
                    "per_call": row.get("per_call"), "per_sample": _per_sample(row),
                    "torch_threads": row.get("torch_threads", metrics.get("torch_threads")),
                    "median_s": row.get("median"), "iqr_s": row.get("iqr"), "noisy": _noisy(row),
                    "n": row.get("n", len(samples) if samples else None), "cold": row.get("cold"),
                    "samples_s": samples, "warmup_samples_s": row.get("warmup_samples")}
            flat.append({**base, **params, **metrics} | params | base)
    return pd.DataFrame(flat) if flat else pd.DataFrame(columns=BASE_COLUMNS)


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
