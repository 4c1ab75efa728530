"""Bundles: export then import gives the same records, importing twice adds nothing, and the CLI reports it."""
import shutil
import tomllib

import pytest

from core import settings
from core.report import bundles
from core.model import profiles
from core.store import files, results
from core.commands.cli import main
from core.params import ConfigError
from tests.app.test_machines_page import made_profile
from tests.helpers import shipped_runs

SHIPPED = settings.APP_ROOT / "results"
MACHINE, RUNS = shipped_runs("matmul", "iris")


@pytest.fixture
def source(tmp_path):
    """A results folder holding two shipped records and a profile of their machine."""
    folder = tmp_path / "source"
    (folder / MACHINE).mkdir(parents=True)
    for run in RUNS:
        shutil.copy(SHIPPED / MACHINE / f"{run}.json", folder / MACHINE)
    files.write_atomic(profiles.path(MACHINE, folder), made_profile(MACHINE))
    return folder


def by_run(folder) -> dict:
    return {r["run_id"]: r for r in results.load_records(folder)}


def test_export_then_import_into_an_empty_folder_gives_the_same_records(source, results_dir, tmp_path):
    exported = bundles.export(tmp_path / "b.tar.gz", results_dir=source)
    assert (exported.records, exported.profiles) == (2, 1)
    imported = bundles.import_bundle(tmp_path / "b.tar.gz")
    assert len(imported.added) == 3 and not imported.skipped and not imported.refused
    assert by_run(results_dir) == by_run(source)
    assert profiles.all(results_dir) == profiles.all(source)


def test_importing_twice_adds_nothing(source, results_dir):
    data, _ = bundles.export_bytes(results_dir=source)
    bundles.import_bundle(data)
    files = sorted(p for p in results_dir.rglob("*") if p.is_file())
    again = bundles.import_bundle(data)
    assert not again.added and not again.refused and len(again.skipped) == 3
    assert sorted(p for p in results_dir.rglob("*") if p.is_file()) == files


def test_a_run_stopped_after_its_last_point_is_the_same_run_when_its_bundle_comes_back(source, results_dir):
    """A bundle carries a record as it is read (a run cancelled in its stand-in censuses reads as complete): the
    doctor's bundle of a machine whose shipped record says cancelled is that record, not a different one."""
    cancelled = results.read_record(source / MACHINE / f"{RUNS[0]}.json") | {"status": "cancelled",
                                                                             "error": "cancelled by the user"}
    cancelled.pop("standins_planned", None)
    files.write_atomic(source / MACHINE / f"{RUNS[0]}.json", cancelled)
    data, _ = bundles.export_bytes(results_dir=source)
    shutil.copytree(source / MACHINE, results_dir / MACHINE)
    before = (results_dir / MACHINE / f"{RUNS[0]}.json").read_bytes()
    imported = bundles.import_bundle(data)
    assert not imported.refused and not imported.added
    assert any(RUNS[0] in name and why == "this run is already here, the same" for name, why in imported.skipped)
    assert (results_dir / MACHINE / f"{RUNS[0]}.json").read_bytes() == before
    assert by_run(results_dir)[RUNS[0]]["status"] == "complete"


def test_a_run_already_here_with_other_content_is_refused_and_kept(source, results_dir):
    data, _ = bundles.export_bytes(results_dir=source)
    (results_dir / MACHINE).mkdir(parents=True)
    mine = results_dir / MACHINE / f"{RUNS[0]}.json"
    record = results.read_record(source / MACHINE / f"{RUNS[0]}.json") | {"preset": "paper"}
    files.write_atomic(mine, record)
    before = mine.read_bytes()
    imported = bundles.import_bundle(data)
    [(name, why)] = [r for r in imported.refused if r[0].startswith("records/")]
    assert RUNS[0] in name and "a different record of run" in why
    assert mine.read_bytes() == before
    assert any(RUNS[1] in name for name in imported.added)


def test_another_profile_of_a_machine_is_refused_and_kept(source, results_dir):
    data, _ = bundles.export_bytes(results_dir=source)
    files.write_atomic(profiles.path(MACHINE, results_dir), made_profile(MACHINE) | {"seconds": 7.0})
    imported = bundles.import_bundle(data)
    assert [name for name, _ in imported.refused] == [f"profiles/{MACHINE}.json"]
    assert "already has another calibrated profile" in imported.refused[0][1]
    assert profiles.all(results_dir)[MACHINE]["seconds"] == 7.0


def test_export_picks_by_machine_and_experiment(source):
    data, exported = bundles.export_bytes(experiment_names=["iris"], results_dir=source)
    assert (exported.records, exported.profiles) == (1, 1)
    _, exported = bundles.export_bytes(machines=[MACHINE], results_dir=source)
    assert (exported.records, exported.profiles) == (2, 1)


@pytest.mark.parametrize("choice, field", [({"machines": ["nope"]}, "--machine"),
                                           ({"experiment_names": ["nope"]}, "--experiment")])
def test_an_unknown_name_is_a_clean_error_naming_the_option(source, choice, field):
    with pytest.raises(ConfigError, match=f"^{field}: 'nope' not found; known: "):
        bundles.export_bytes(results_dir=source, **choice)


def test_nothing_to_export_is_said_and_no_file_is_written(results_dir, tmp_path):
    with pytest.raises(ConfigError, match="nothing to export"):
        bundles.export(tmp_path / "b.tar.gz")
    assert not (tmp_path / "b.tar.gz").exists()


def test_the_cli_exports_and_imports_with_a_report_and_exit_status(source, results_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(settings.RESULTS_ENV, str(source))
    assert main(["export", "-o", str(tmp_path / "b.tar.gz"), "--experiment", "matmul"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'b.tar.gz'}: 1 record and 1 calibrated profile")
    monkeypatch.setenv(settings.RESULTS_ENV, str(results_dir))
    assert main(["import", str(tmp_path / "b.tar.gz")]) == 0
    assert capsys.readouterr().out.startswith("added 2, skipped 0, refused 0")
    assert main(["import", str(tmp_path / "b.tar.gz")]) == 0
    assert capsys.readouterr().out.startswith("added 0, skipped 2, refused 0")
    (tmp_path / "junk.tar.gz").write_bytes(b"not a bundle")
    assert main(["import", str(tmp_path / "junk.tar.gz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: not a Crossover bundle") and "Traceback" not in err


def test_many_bundles_import_at_once_and_one_that_is_not_a_bundle_stops_only_itself(source, results_dir, tmp_path,
                                                                                    monkeypatch, capsys):
    monkeypatch.setenv(settings.RESULTS_ENV, str(source))
    assert main(["export", "-o", str(tmp_path / "a.tar.gz"), "--experiment", "matmul"]) == 0
    (tmp_path / "junk.tar.gz").write_bytes(b"not a bundle")
    monkeypatch.setenv(settings.RESULTS_ENV, str(results_dir))
    capsys.readouterr()
    assert main(["import", str(tmp_path / "junk.tar.gz"), str(tmp_path / "a.tar.gz")]) == 2
    out, err = capsys.readouterr()
    assert out.startswith(f"{tmp_path / 'a.tar.gz'}: added 2, skipped 0, refused 0")
    assert err.startswith(f"error: {tmp_path / 'junk.tar.gz'}: not a Crossover bundle")


def test_import_is_refused_read_only(source, results_dir, monkeypatch, capsys):
    data, _ = bundles.export_bytes(results_dir=source)
    (results_dir.parent / "b.tar.gz").write_bytes(data)
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    assert main(["import", str(results_dir.parent / "b.tar.gz")]) == 2
    assert "read-only" in capsys.readouterr().err
    assert not results_dir.exists()


def test_the_bundle_cap_is_streamlits_upload_limit():
    config = tomllib.loads((settings.APP_ROOT / ".streamlit" / "config.toml").read_text())
    assert bundles.MAX_BUNDLE_BYTES == config["server"]["maxUploadSize"] * 2**20
