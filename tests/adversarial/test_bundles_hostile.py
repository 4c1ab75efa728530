"""Hostile bundles: each bad member is refused with a message naming it and why, nothing is written outside
the results folder, and the good members beside it are still imported; a file that is not a bundle at all
is refused whole."""
import gzip
import hashlib
import io
import json
import tarfile

import pytest

from core import settings
from core.report import bundles
from core.store import results
from tests.helpers import shipped_runs

SHIPPED = settings.APP_ROOT / "results"
MACHINE, (GOOD_RUN, OTHER_RUN) = shipped_runs("matmul", "iris")
GOOD = (f"records/{MACHINE}/{GOOD_RUN}.json", (SHIPPED / MACHINE / f"{GOOD_RUN}.json").read_bytes())
OTHER = results.read_record(SHIPPED / MACHINE / f"{OTHER_RUN}.json")


def member(name: str, data: bytes = b"", kind=tarfile.REGTYPE, mode=0o644, link: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, len(data) if kind == tarfile.REGTYPE else 0, link
    return info, data


def pack(members: list[tuple], listed: list[tuple] = None, manifest: dict = None) -> bytes:
    """A gzip'd tar of a manifest (listing `listed`, by default every member, with true checksums) and `members`."""
    entries = [{"name": info.name, "kind": "profile" if info.name.startswith("profiles/") else "record",
                "size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for info, data in listed or members]
    manifest = manifest or {"format": bundles.FORMAT, "format_version": bundles.FORMAT_VERSION,
                            "created": "2026-01-01T00:00:00+00:00", "code_version": {}, "members": entries}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in [member(bundles.MANIFEST, json.dumps(manifest).encode()), *members]:
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return buffer.getvalue()


def record_bytes(**changes) -> bytes:
    return json.dumps(OTHER | changes).encode()


OTHER_NAME = f"records/{MACHINE}/{OTHER['run_id']}.json"
TAMPERED = record_bytes(preset="paper")
BAD_TRACE = dict(OTHER, rows=[dict(OTHER["rows"][0], breakdown={"trace": "/etc/passwd"})])

HOSTILE = {
    "tampered": ([member(OTHER_NAME, TAMPERED)], [member(OTHER_NAME, record_bytes())], OTHER_NAME,
                 "checksum does not match"),
    "a path up": ([member("../escaped.json", record_bytes())], None, "../escaped.json", "not a name a bundle holds"),
    "an absolute path": ([member("/tmp/escaped.json", record_bytes())], None, "escaped.json", "not a name a bundle holds"),
    "a symbolic link": ([member(OTHER_NAME, kind=tarfile.SYMTYPE, link="/etc/passwd")], [member(OTHER_NAME)],
                        OTHER_NAME, "a symbolic link"),
    "a hard link": ([member(OTHER_NAME, kind=tarfile.LNKTYPE, link=GOOD[0])], [member(OTHER_NAME)], OTHER_NAME,
                    "a hard link"),
    "an executable": ([member(OTHER_NAME, record_bytes(), mode=0o755)], None, OTHER_NAME, "executable"),
    "a foreign schema": ([member(OTHER_NAME, record_bytes(schema=99))], None, OTHER_NAME,
                         "not a Crossover record of schema 1 or 2"),
    "a record failing its schema": ([member(OTHER_NAME, record_bytes(status="fine"))], None, OTHER_NAME,
                                    "field status"),
    "a path inside a record": ([member(OTHER_NAME, json.dumps(BAD_TRACE).encode())], None, OTHER_NAME,
                               "rows/0/breakdown/trace: '/etc/passwd' is a path outside the run's own folder"),
    "an unlisted member": ([member(OTHER_NAME, record_bytes())], [], OTHER_NAME, "not listed in the manifest"),
    "a misnamed record": ([member(f"records/{MACHINE}/someone-else.json", record_bytes())], None, "someone-else.json",
                          "are not those of its name"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_member_is_refused_naming_it_and_the_good_one_is_imported(case, results_dir, tmp_path):
    members, listed, name, why = HOSTILE[case]
    good = member(*GOOD)
    imported = bundles.import_bundle(pack([good, *members], None if listed is None else [good, *listed]))
    assert imported.added == [GOOD[0]]
    [(refused, said)] = imported.refused
    assert name in refused and why in said
    assert sorted(p.name for p in (results_dir / MACHINE).iterdir()) == [f"{GOOD_RUN}.json"]
    assert not list(tmp_path.rglob("escaped.json"))
    assert not (tmp_path.parent / "escaped.json").exists()


def test_an_oversized_member_is_refused_unread(results_dir, monkeypatch):
    monkeypatch.setattr(results, "MAX_RECORD_BYTES", len(GOOD[1]) + 10)
    big = record_bytes(error="x" * len(GOOD[1]))
    imported = bundles.import_bundle(pack([member(*GOOD), member(OTHER_NAME, big)]))
    assert imported.added == [GOOD[0]]
    assert imported.refused == [(OTHER_NAME, f"{len(big):,} bytes, over the {results.MAX_RECORD_BYTES / 1e6:g} MB "
                                             "cap on a member")]


def test_a_record_never_goes_through_a_linked_machine_folder(results_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    results_dir.mkdir()
    (results_dir / MACHINE).symlink_to(elsewhere)
    imported = bundles.import_bundle(pack([member(*GOOD)]))
    assert not imported.added and "is a symbolic link, which is never written through" in imported.refused[0][1]
    assert not list(elsewhere.iterdir())


@pytest.mark.parametrize("data, why", [
    (b"just text", "not a Crossover bundle (a gzip'd tar)"),
    (gzip.compress(b"just text" * 100, mtime=0), "not a Crossover bundle (a gzip'd tar)"),  # one id on every worker
    (pack([member(*GOOD)], manifest={"format": "someone-elses-bundle", "format_version": 3}),
     "manifest.json: format 'someone-elses-bundle' version 3 is foreign"),
    (pack([member(*GOOD)], manifest={"format": bundles.FORMAT, "format_version": 1, "members": "all"}),
     "manifest.json: "),
])
def test_a_file_that_is_not_a_bundle_is_refused_whole(data, why, results_dir):
    with pytest.raises(bundles.BundleError, match=why.replace("(", r"\(").replace(")", r"\)")):
        bundles.import_bundle(data)
    assert not results_dir.exists()


def test_a_gzip_bomb_stops_at_the_unpacked_cap(results_dir, monkeypatch):
    monkeypatch.setattr(bundles, "MAX_UNPACKED_BYTES", 100_000)
    bomb = pack([member(*GOOD), member(OTHER_NAME, b" " * 1_000_000)])
    assert len(bomb) < 50_000
    with pytest.raises(bundles.BundleError, match="unpacks to over"):
        bundles.import_bundle(bomb)
    assert not results_dir.exists()


def test_a_bundle_over_the_cap_is_refused_unread(results_dir, monkeypatch, tmp_path):
    monkeypatch.setattr(bundles, "MAX_BUNDLE_BYTES", 1000)
    (tmp_path / "big.tar.gz").write_bytes(b"\0" * 2000)
    with pytest.raises(bundles.BundleError, match="over the .* cap on a bundle"):
        bundles.import_bundle(tmp_path / "big.tar.gz")
