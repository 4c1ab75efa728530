"""The code version: a checkout's commit, dirty when its code has uncommitted changes, not when only the
results it ships (data the code wrote) do."""
import subprocess

import pytest

from core import settings, versions


def git(folder, *args):
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    (tmp_path / "core").mkdir()
    (tmp_path / "results" / "some-machine").mkdir(parents=True)
    (tmp_path / "core" / "model.py").write_text("A = 1\n")
    (tmp_path / "results" / "some-machine" / "run.json").write_text("{}\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    monkeypatch.setattr(settings, "APP_ROOT", tmp_path)
    versions.code_version.cache_clear()
    yield tmp_path
    versions.code_version.cache_clear()


def test_a_retaken_result_leaves_the_code_clean(checkout):
    (checkout / "results" / "some-machine" / "run.json").write_text('{"retaken": true}\n')
    found = versions.code_version()
    assert found["dirty"] is False and len(found["commit"]) == 40


def test_a_changed_module_makes_it_dirty(checkout):
    (checkout / "core" / "model.py").write_text("A = 2\n")
    assert versions.code_version()["dirty"] is True
