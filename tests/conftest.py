import pytest
import torch

from core import settings


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch):
    """Every test writes to its own results folder, never to the shipped results/."""
    folder = tmp_path / "results"
    monkeypatch.setenv(settings.RESULTS_ENV, str(folder))
    monkeypatch.delenv(settings.READ_ONLY_ENV, raising=False)
    return folder


@pytest.fixture
def shipped_results(monkeypatch):
    """Point the app at the results shipped in the repository (read them, never run into them)."""
    monkeypatch.setenv(settings.RESULTS_ENV, str(settings.APP_ROOT / "results"))
    return settings.APP_ROOT / "results"


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on a busy 2-core machine: two OpenMP threads can stall each other badly."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
