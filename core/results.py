"""The results store: one JSON record per run under results/<machine-id>/, written atomically after
every point, and loaded tolerantly into pandas."""
import json
import os
import tempfile
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from core import devices, runlock, settings

SCHEMA_VERSION = 1
STATUSES = ("running", "complete", "partial", "failed", "cancelled")
PUBLISHED_FILE = Path(__file__).with_name("published.json")


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
            "fingerprint": fp, "started": now(), "ended": None, "status": "running",
            "planned_points": 0, "rows": [], "error": None,
        }
        folder = (results_dir or settings.results_dir()) / fp["machine_id"]
        self.path = folder / f"{self.record['run_id']}.json"

    def start(self, planned_points: int) -> None:
        self.record["planned_points"] = planned_points
        write_atomic(self.path, self.record)

    def add(self, row: dict) -> None:
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
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"not a Crossover record of schema {SCHEMA_VERSION}")
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
    return {"run_id": record["run_id"], "experiment": record["experiment"], "preset": record.get("preset"),
            "status": record["status"], "machine_id": record.get("machine_id"),
            "machine": devices.label(record["fingerprint"]), "started": record.get("started"),
            "ended": record.get("ended"), "points": len(record["rows"]),
            "planned_points": record.get("planned_points")}


def runs_frame(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([record_summary(r) for r in records])


BASE_COLUMNS = ["run_id", "experiment", "preset", "status", "machine_id", "machine", "started", "ended", "points",
                "planned_points", "device", "device_name", "variant", "point_status", "error", "median_s", "iqr_s",
                "noisy", "samples_s"]


def rows_frame(records: list[dict], experiment: str = None) -> pd.DataFrame:
    """One row per measured point, with its run's metadata; swept parameters and metrics become
    columns of their own, raw samples are kept. Empty, it still has the base columns."""
    flat = []
    for record in records:
        if experiment and record["experiment"] != experiment:
            continue
        meta = record_summary(record)
        for row in record["rows"]:
            flat.append({**meta, "device": row["device"], "device_name": device_name(record, row["device"]),
                         "variant": row["variant"], "point_status": row.get("status", "ok"),
                         "error": row.get("error"), **row.get("params", {}),
                         "median_s": row.get("median"), "iqr_s": row.get("iqr"), "noisy": row.get("noisy"),
                         "samples_s": row.get("samples"), **row.get("metrics", {})})
    return pd.DataFrame(flat) if flat else pd.DataFrame(columns=BASE_COLUMNS)


def device_name(record: dict, device: str) -> str:
    fp = record["fingerprint"]
    if device == "cpu":
        return fp["cpu_model"]
    for gpu in fp.get("gpus", []):
        if gpu["device"] == device:
            return gpu["name"]
    return device


def load_published(experiment: str = None) -> pd.DataFrame:
    """The write-ups' own figures, one row each: experiment, figure, quantity, unit, value, device,
    hardware (as stated), params, source."""
    entries = json.loads(PUBLISHED_FILE.read_text())["figures"]
    rows = [{**{k: v for k, v in e.items() if k != "params"}, **e.get("params", {})}
            for e in entries if experiment in (None, e["experiment"])]
    return pd.DataFrame(rows)
