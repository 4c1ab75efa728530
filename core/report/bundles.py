"""Result bundles: records and their machines' calibrated profiles in one gzip'd tar, to carry results from
one Crossover to another (`python -m core export` and `import`, the Machines page).

A bundle holds `manifest.json` (FORMAT and FORMAT_VERSION, when and by which code it was made, and each
member's name, kind, size and SHA-256) and its members, `records/<machine id>/<run id>.json` and
`profiles/<machine id>.json`. Run artefacts (profiler traces, operator tables) stay behind: an imported run
shows everything but its profiler trace.

Import never extracts anything: it reads the archive in memory, within MAX_UNPACKED_BYTES, and checks each
member: a regular file (no link, device or folder), not executable, named as the manifest lists it and in
one of the two shapes (never an absolute or `..` path), within its size cap, matching its checksum, valid
against the record (or profile) schema, its run id and machine id those of its name. A run already in the
results folder with the same content is skipped; with other content it is refused: a record is never
overwritten. A profile is added where its machine has none, skipped where the same one is there, and
refused where another one is."""
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import jsonschema

from core import experiments, settings, versions
from core.model import profiles
from core.store import files, results
from core.params import ConfigError, shown

FORMAT, FORMAT_VERSION = "crossover-bundle", 1
MANIFEST = "manifest.json"
MAX_BUNDLE_BYTES = 25 * 2**20            # Streamlit's server.maxUploadSize (.streamlit/config.toml), in MiB there
MAX_UNPACKED_BYTES = 8 * MAX_BUNDLE_BYTES  # all members together, once decompressed
MAX_MEMBERS = 10_000
MEMBER_NAME = re.compile(r"records/(?P<machine>[a-z0-9][a-z0-9-]*)/(?P<run>[A-Za-z0-9][A-Za-z0-9_-]{0,99})\.json"
                         r"|profiles/(?P<profiled>[a-z0-9][a-z0-9-]*)\.json")
MANIFEST_SCHEMA = {
    "type": "object", "required": ["format", "format_version", "created", "code_version", "members"],
    "properties": {
        "format": {"const": FORMAT}, "format_version": {"const": FORMAT_VERSION},
        "created": {"type": "string"}, "code_version": {"type": "object"},
        "members": {"type": "array", "maxItems": MAX_MEMBERS, "items": {
            "type": "object", "required": ["name", "kind", "size", "sha256"],
            "properties": {"name": {"type": "string", "maxLength": 300}, "kind": {"enum": ["record", "profile"]},
                           "size": {"type": "integer", "minimum": 0},
                           "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}},
    },
}
_MANIFEST_VALIDATOR = jsonschema.Draft202012Validator(MANIFEST_SCHEMA)


class BundleError(ValueError):
    """The file as a whole is not a bundle this Crossover can read (the member-by-member problems refuse
    only their member)."""


@dataclass
class Exported:
    records: int
    profiles: int
    bytes: int

    def text(self, where: str) -> str:
        return (f"wrote {where}: {self.records} record{'s' * (self.records != 1)} and {self.profiles} calibrated "
                f"profile{'s' * (self.profiles != 1)}, {self.bytes / 1e3:,.1f} kB")


@dataclass
class Imported:
    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (member, why)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"added {len(self.added)}, skipped {len(self.skipped)}, refused {len(self.refused)}"]
        lines += [f"  added    {name}" for name in self.added]
        lines += [f"  skipped  {name}: {why}" for name, why in self.skipped]
        lines += [f"  refused  {name}: {why}" for name, why in self.refused]
        if self.added:
            lines.append("Run artefacts (profiler traces, operator tables) do not travel in a bundle.")
        return "\n".join(lines)


# -- export -------------------------------------------------------------------------------------------------

def export_bytes(machines: list[str] | None = None, experiment_names: list[str] | None = None,
                 results_dir: Path | None = None) -> tuple[bytes, Exported]:
    """The bundle of the chosen records (every finished one by default) and their machines' profiles.
    ConfigError naming `--machine` or `--experiment` for an unknown name, or when nothing matches."""
    folder = results_dir or settings.results_dir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the loaders skip is not exported; the pages say why
        records, calibrated = results.load_records(folder), profiles.all(folder)
    chosen, chosen_profiles = selection(records, calibrated, machines, experiment_names)
    members = {f"records/{r['machine_id']}/{r['run_id']}.json": ("record", _json_bytes(r)) for r in chosen}
    members |= {f"profiles/{mid}.json": ("profile", _json_bytes(p)) for mid, p in chosen_profiles.items()}
    if not members:
        raise ConfigError("--experiment" if experiment_names else "--machine",
                          "nothing to export: no finished record matches" + ("" if records else
                                                                              f" (the results folder {folder} holds none)"))
    data = _pack(members)
    return data, Exported(len(chosen), len(chosen_profiles), len(data))


def selection(records: list[dict], calibrated: dict[str, dict], machines: list[str] | None = None,
              experiment_names: list[str] | None = None) -> tuple[list[dict], dict[str, dict]]:
    """The records a bundle of this choice holds (every finished one of the machines and experiments chosen)
    and the profiles (of the machines chosen, else of the machines of those records; all without a choice).
    ConfigError naming `--machine` or `--experiment` for a name not found."""
    _check_choice("--machine", machines, {r["machine_id"] for r in records} | set(calibrated))
    _check_choice("--experiment", experiment_names, set(experiments.registry()) | {r["experiment"] for r in records})
    chosen = [r for r in records if r["status"] != "running"
              and (not machines or r["machine_id"] in machines)
              and (not experiment_names or r["experiment"] in experiment_names)]
    wanted = {r["machine_id"] for r in chosen} | (set() if experiment_names else set(machines or calibrated))
    return chosen, {mid: p for mid, p in calibrated.items() if mid in wanted}


def export(output: Path | BinaryIO, machines: list[str] | None = None, experiment_names: list[str] | None = None,
           results_dir: Path | None = None) -> Exported:
    """Write the bundle to `output` (a path: through a temporary file renamed into place, so no partial
    bundle is ever left; or an open binary file)."""
    data, exported = export_bytes(machines, experiment_names, results_dir)
    if not isinstance(output, (str, Path)):
        output.write(data)
        return exported
    target = Path(output)
    if target.is_dir():
        raise ConfigError("--output", f"{target} is a folder; name the bundle file to write")
    try:
        files.replace_atomic(target, data)
    except OSError as e:
        raise ConfigError("--output", f"cannot write {target}: {e.strerror or e}") from None
    return exported


def _check_choice(option: str, chosen: list[str] | None, known: set[str]) -> None:
    unknown = [name for name in chosen or () if name not in known]
    if unknown:
        raise ConfigError(option, f"{', '.join(map(shown, unknown))} not found; known: {', '.join(sorted(known)) or 'none'}")


def _json_bytes(data: dict) -> bytes:
    return json.dumps(data, indent=1).encode()


def _pack(members: dict[str, tuple[str, bytes]]) -> bytes:
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "created": results.now(),
                "code_version": versions.code_version(),
                "members": [{"name": name, "kind": kind, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                            for name, (kind, data) in members.items()]}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in [(MANIFEST, _json_bytes(manifest))] + [(n, d) for n, (_, d) in members.items()]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# -- import -------------------------------------------------------------------------------------------------

class _Capped(io.RawIOBase):
    """The decompressed stream, stopped with BundleError past MAX_UNPACKED_BYTES (a gzip bomb)."""

    def __init__(self, stream: BinaryIO):
        self.stream, self.read_so_far = stream, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        self.read_so_far += len(data)
        if self.read_so_far > MAX_UNPACKED_BYTES:
            raise BundleError(f"unpacks to over {MAX_UNPACKED_BYTES / 2**20:g} MiB: not a bundle Crossover made")
        buffer[:len(data)] = data
        return len(data)


def import_bundle(source: Path | bytes, results_dir: Path | None = None) -> Imported:
    """Check every member of the bundle and merge the good ones into the results folder; what was added,
    skipped and refused (and why). BundleError when the file is not a bundle; ReadOnlyError when read-only."""
    settings.require_writable("importing results")
    folder = results_dir or settings.results_dir()
    manifest, files, report = _unpack(_bundle_bytes(source))
    listed = {entry["name"]: entry for entry in manifest["members"]}
    existing = {path.stem: path for path in results.record_paths(folder)}
    for name, (info, data) in files.items():
        problem = _member_problem(name, info, data, listed.get(name))
        if problem:
            report.refused.append((name, problem))
            continue
        try:
            outcome = (_merge_record if listed[name]["kind"] == "record" else _merge_profile)(name, data, folder, existing)
        except (ValueError, profiles.ProfileError, OSError) as e:
            report.refused.append((name, str(e)))
            continue
        (report.added.append(name) if outcome is None else report.skipped.append((name, outcome)))
    report.refused += [(name, "listed in the manifest but not in the bundle") for name in listed if name not in files]
    return report


def _bundle_bytes(source: Path | bytes) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        try:
            if os.path.getsize(source) > MAX_BUNDLE_BYTES:
                raise BundleError(f"{source} is over the {MAX_BUNDLE_BYTES / 2**20:g} MiB cap on a bundle")
            data = Path(source).read_bytes()
        except OSError as e:
            raise BundleError(f"cannot read {source}: {e.strerror or e}") from None
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"over the {MAX_BUNDLE_BYTES / 2**20:g} MiB cap on a bundle")
    return data


def _unpack(data: bytes) -> tuple[dict, dict[str, tuple[tarfile.TarInfo, bytes]], Imported]:
    """The manifest and every other member's header and bytes (a member that is not a regular file has no
    bytes); the members refused already (a second copy of a name) in the report."""
    files, report = {}, Imported()
    try:
        with tarfile.open(fileobj=io.BufferedReader(_Capped(gzip.GzipFile(fileobj=io.BytesIO(data)))), mode="r|") as tar:
            for number, info in enumerate(tar):
                if number > MAX_MEMBERS:
                    raise BundleError(f"over {MAX_MEMBERS:,} members: not a bundle Crossover made")
                content = tar.extractfile(info).read() if info.isreg() and info.size <= results.MAX_RECORD_BYTES else b""
                if info.name in files:
                    report.refused.append((info.name, "a second member of the same name"))
                else:
                    files[info.name] = (info, content)
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise BundleError(f"not a Crossover bundle (a gzip'd tar): {e}") from None
    manifest = files.pop(MANIFEST, None)
    if manifest is None:
        raise BundleError(f"no {MANIFEST}: not a Crossover bundle")
    return _manifest(manifest), files, report


def _manifest(member: tuple[tarfile.TarInfo, bytes]) -> dict:
    info, data = member
    try:
        manifest = json.loads(data) if info.isreg() else None
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict):
        raise BundleError(f"{MANIFEST} is not a JSON object: not a Crossover bundle")
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise BundleError(f"{MANIFEST}: format {shown(manifest.get('format'))} version "
                          f"{shown(manifest.get('format_version'))} is foreign; this Crossover reads {FORMAT} "
                          f"version {FORMAT_VERSION}")
    error = jsonschema.exceptions.best_match(_MANIFEST_VALIDATOR.iter_errors(manifest))
    if error is not None:
        raise BundleError(f"{MANIFEST}: {'/'.join(map(str, error.absolute_path)) or 'manifest'}: {error.message[:200]}")
    return manifest


def _member_problem(name: str, info: tarfile.TarInfo, data: bytes, entry: dict | None) -> str | None:
    """Why a member cannot be imported, before its content is read, or None."""
    if not info.isreg():
        kind = "a symbolic link" if info.issym() else "a hard link" if info.islnk() else \
            "a folder" if info.isdir() else "not a regular file"
        return f"{kind}: a bundle holds regular files only"
    if not MEMBER_NAME.fullmatch(name):
        return "not a name a bundle holds (records/<machine id>/<run id>.json or profiles/<machine id>.json)"
    if info.mode & 0o111:
        return "executable: a bundle holds data only"
    if info.size > results.MAX_RECORD_BYTES:
        return f"{info.size:,} bytes, over the {results.MAX_RECORD_BYTES / 1e6:g} MB cap on a member"
    if entry is None:
        return "not listed in the manifest"
    if entry["kind"] != ("record" if name.startswith("records/") else "profile"):
        return f"listed as a {entry['kind']} but named like another kind"
    if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return "its checksum does not match the manifest's: changed since the bundle was made"
    return None


def _merge_record(name: str, data: bytes, folder: Path, existing: dict[str, Path]) -> str | None:
    """Add the record, or say why it is skipped; ValueError when it is refused."""
    match = MEMBER_NAME.fullmatch(name)
    record = results.parse_record(data)
    if record["run_id"] != match["run"] or record["machine_id"] != match["machine"]:
        raise ValueError(f"its run id {shown(record['run_id'])} and machine id {shown(record['machine_id'])} are "
                         "not those of its name")
    here = existing.get(record["run_id"])
    if here is not None:
        if results.settled(results.read_record(here)) == results.settled(record):
            return "this run is already here, the same"
        raise ValueError(f"a different record of run {record['run_id']} is already here ({here}); a record is "
                         "never overwritten")
    _check_artefact_names(record)
    target = _unlinked(folder, match["machine"]) / f"{record['run_id']}.json"
    files.write_atomic(target, record)
    existing[record["run_id"]] = target
    return None


def _merge_profile(name: str, data: bytes, folder: Path, existing: dict[str, Path]) -> str | None:
    machine = MEMBER_NAME.fullmatch(name)["profiled"]
    try:
        profile = json.loads(data)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from None
    profiles.validate(profile)
    if profile["machine_id"] != machine:
        raise ValueError(f"its machine id {shown(profile['machine_id'])} is not that of its name")
    target = _unlinked(folder, machine, profiles.SUBFOLDER) / profiles.FILE_NAME
    if os.path.lexists(target):
        if profiles.read(target) == profile:
            return "this machine's profile is already here, the same"
        raise ValueError(f"machine {machine} already has another calibrated profile here ({target}); it is kept")
    files.write_atomic(target, profile)
    return None


def _check_artefact_names(record: dict) -> None:
    """A row names its run's artefacts by paths inside the run's own folder; a record naming any other path
    (absolute, `..`, another run's) is refused: the pages read what a record names."""
    inside = re.compile(re.escape(record["run_id"]) + r"/[A-Za-z0-9_-][A-Za-z0-9_.-]*")
    for number, row in enumerate(record["rows"]):
        for key in ("trace", "table"):
            named = (row.get("breakdown") or {}).get(key)
            if named is not None and not (isinstance(named, str) and inside.fullmatch(named) and ".." not in named):
                raise ValueError(f"rows/{number}/breakdown/{key}: {shown(named)} is a path outside the run's own "
                                 f"folder ({record['run_id']}/...)")


def _unlinked(folder: Path, *parts: str) -> Path:
    """folder/parts..., refused where a part is a symbolic link (a hostile folder could point it anywhere)."""
    target = folder
    for part in parts:
        target = target / part
        if target.is_symlink():
            raise ValueError(f"{target} is a symbolic link, which is never written through")
    return target
