"""`python -m core info`: this machine's fingerprint, for people or as JSON."""
import json

from core import devices, versions


def register(sub) -> None:
    parser = sub.add_parser("info", help="this machine: CPU, cores, memory, GPUs, versions, code version")
    parser.add_argument("--json", action="store_true", help="print the raw fingerprint as JSON")
    parser.set_defaults(command=run)


def run(args) -> int:
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
