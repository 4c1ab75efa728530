"""A results folder of hand-made bad files, as an attacker or a careless user leaves one: the loader keeps
the one good record and names every other file in a warning (with the field, for a record failing its
schema), without following a link, blocking on a pipe or reading past the size cap; the pages and the CLI
still work."""
import json
import os
import warnings

import pytest

from core import experiments, settings
from core.commands import cli
from core.store import results
from core.store.results import RecordWriter
from tests.helpers import render

ROW = {"device": "cpu", "variant": "numpy", "params": {"size": 16}, "status": "ok", "unit": "product", "per_call": 1,
       "torch_threads": 1, "samples": [1e-6, 2e-6, 3e-6], "median": 2e-6, "iqr": 1e-6, "noisy": True, "n": 3,
       "warmup_samples": [], "cold": False, "metrics": {"gflop_per_s": 4.1}}

LINK, PIPE, FOLDER, TOO_LARGE = ("a symbolic link", "a named pipe", "a folder",
                                 f"over the {results.MAX_RECORD_BYTES / 1e6:g} MB cap")

# Schema-1 copies of the good record, each with one field broken, and the warning's words for that field.
BROKEN_FIELDS = {
    "rows-a-string": (lambda r: {"rows": "x"}, "field rows: 'x' is not of type 'array'"),
    "rows-not-objects": (lambda r: {"rows": [1, "two"]}, "field rows/0: 1 is not of type 'object'"),
    "params-a-string": (lambda r: {"rows": [r["rows"][0] | {"params": "size"}]},
                        "field rows/0/params: 'size' is not of type 'object'"),
    "fingerprint-empty": (lambda r: {"fingerprint": {}}, "field fingerprint: 'cpu_model' is a required property"),
}


def _good_record(folder) -> dict:
    exp = experiments.get("matmul")
    writer = RecordWriter("matmul", "smoke", exp.config("smoke"), ["cpu"], results_dir=folder)
    writer.start(1)
    writer.add(ROW)
    writer.finish("complete")
    return writer.record


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """(the folder, the good record, {bad path: words its warning must hold}); the app reads the folder."""
    folder, outside = tmp_path / "hostile", tmp_path / "outside"
    good = _good_record(folder)
    machine = folder / good["machine_id"]
    _good_record(outside)  # a record outside the results folder, reached only through links
    stolen = next(outside.glob("*/*.json"))
    expected = {}
    for name, (change, words) in BROKEN_FIELDS.items():
        (machine / f"{name}.json").write_text(json.dumps(good | {"schema": 1, "run_id": name} | change(good)))
        expected[machine / f"{name}.json"] = words
    links = {"dangling": tmp_path / "nowhere.json", "dev-zero": "/dev/zero", "to-a-file": stolen,
             "to-a-folder": outside}
    for name, target in links.items():
        (machine / f"{name}.json").symlink_to(target)
        expected[machine / f"{name}.json"] = LINK
    os.mkfifo(machine / "x.json")
    expected[machine / "x.json"] = PIPE
    with open(machine / "big.json", "wb") as f:
        f.truncate(51_000_000)  # sparse: no disk, but 51 MB to a reader
    expected[machine / "big.json"] = TOO_LARGE
    (machine / "y.json").mkdir()
    expected[machine / "y.json"] = FOLDER
    (folder / "linked-machine").symlink_to(stolen.parent)
    expected[folder / "linked-machine"] = LINK
    (machine / f".{good['run_id']}.json.k1ll3d.tmp").write_text(json.dumps(good | {"run_id": "leftover"}))
    monkeypatch.setenv(settings.RESULTS_ENV, str(folder))
    return folder, good, expected


@pytest.mark.timeout(60)  # generous for a loaded machine: what it guards against (a pipe) never returns
def test_only_the_good_record_loads_and_every_other_file_is_named(hostile):
    folder, good, expected = hostile
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = results.load_records(folder)
    assert [r["run_id"] for r in loaded] == [good["run_id"]]
    messages = [str(w.message) for w in caught]
    assert len(messages) == len(expected)
    for path, words in expected.items():
        assert any(m.startswith(f"skipping {path}: ") and words in m for m in messages), (path, words, messages)


@pytest.mark.full
@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", ["pages/overview.py", "pages/matmul.py", "pages/machines.py"])
def test_the_pages_render_and_name_the_bad_files(hostile, page):
    at = render(page)
    assert not at.exception
    shown = " ".join(w.value for w in at.warning)
    assert all(str(path) in shown for path in hostile[2])


def test_the_cli_still_works(hostile, capsys):
    assert cli.main(["list"]) == 0 and "matmul" in capsys.readouterr().out
    assert cli.main(["info", "--json"]) == 0 and json.loads(capsys.readouterr().out)["machine_id"] == hostile[1]["machine_id"]


@pytest.mark.timeout(60)  # generous for a loaded machine: what it guards against (a pipe) never returns
def test_a_run_still_writes_into_the_hostile_folder(hostile):
    folder, good, _ = hostile
    another = _good_record(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert {r["run_id"] for r in results.load_records(folder)} == {good["run_id"], another["run_id"]}
    assert (folder / good["machine_id"] / "x.json").exists()  # nothing of the folder was removed
