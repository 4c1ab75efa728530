"""The machines a results folder knows, by the fingerprints their records and calibrated profiles carry, as one
table for people (the Machines page, the single-file report, the side-by-side view)."""
import pandas as pd

from core import devices


def fingerprints(records: list[dict], calibrated: dict[str, dict] = None) -> dict[str, dict]:
    """Each machine's fingerprint, by machine id: its latest record's, else its calibrated profile's."""
    found = {r["machine_id"]: r["fingerprint"] for r in sorted(records, key=lambda r: r.get("started") or "")}
    for machine_id, profile in (calibrated or {}).items():
        found.setdefault(machine_id, profile["fingerprint"])
    return found


def gpus_text(fp: dict) -> str:
    return ", ".join(f"{g['name']} ({g.get('memory_gib', '?')} GiB, cc {g.get('compute_capability', '?')}, "
                     f"driver {g.get('cuda_driver', '?')})" for g in fp.get("gpus", [])) or "none"


def table(found: dict[str, dict]) -> pd.DataFrame:
    """One row per machine: id, CPU, cores, threads, memory, OS, GPUs and the software versions."""
    return pd.DataFrame([{
        "machine id": machine_id, "CPU": devices.cpu_text(fp),
        "physical / logical cores": f"{fp.get('cpu_physical_cores', '?')} / {fp['cpu_logical_cores']}",
        "torch threads": fp.get("torch_threads"), "memory (GiB)": fp.get("memory_gib"), "OS": fp.get("os"),
        "GPUs": gpus_text(fp), "python": fp.get("python"), "torch": fp.get("torch"), "CUDA": fp.get("cuda"),
        "cuDNN": fp.get("cudnn"),
    } for machine_id, fp in found.items()])


def label(machine_id: str, fp: dict) -> str:
    """'Intel Xeon (2 threads) / no GPU · intel-xeon-1a2b3c4d': a machine for a picker."""
    return f"{devices.label(fp)} · {machine_id}"
