"""The single-file report: everything inlined, every experiment and machine in it, record text escaped, and
the CLI's clean errors."""
import re
import shutil

import pytest

from core import settings
from core.report import single_file
from core.store import files, results
from core.commands.cli import main
from tests.helpers import shipped_runs

SHIPPED = settings.APP_ROOT / "results"
MACHINE = SHIPPED / shipped_runs("matmul", "iris")[0]  # a machine with both (not every one has: the H200 ran matmul alone)


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    """The report of a folder holding matmul's shipped record, its machine renamed to carry markup."""
    folder = tmp_path_factory.mktemp("results")
    record = results.read_record(next(MACHINE.glob("matmul-*.json")))
    record["fingerprint"]["cpu_model"] = "<script>alert('cpu')</script> Xeon"
    files.write_atomic(folder / MACHINE.name / f"{record['run_id']}.json", record)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.RESULTS_ENV, str(folder))
        return single_file.build()


@pytest.mark.full
def test_nothing_is_fetched_from_outside_the_file(document):
    """The markup loads nothing (the inlined libraries' own code holds markup in strings: it is left out)."""
    markup = re.sub(r"<script>.*?</script>", "<script></script>", document, flags=re.S)
    assert markup.count("<script></script>") == 2  # the inlined libraries, then the charts
    fetching = re.findall(r"<(?:script|img|iframe|link|source|object|embed)\b[^>]*\b(?:src|href|data)=", markup, re.I)
    assert not fetching and "@import" not in markup and "url(" not in markup


@pytest.mark.full
def test_every_experiment_the_matrix_and_the_machines_are_there(document):
    from core import experiments
    for exp in experiments.registry().values():
        assert exp.title.replace("&", "&amp;") in document
    assert "The claims, checked on each machine" in document and "<h2>Machines</h2>" in document
    assert "Xeon" in document and "Measured points: run matmul-" in document


@pytest.mark.full
def test_text_from_a_record_is_escaped(document):
    assert "<script>alert('cpu')</script>" not in document
    assert "&lt;script&gt;alert" in document or "\\u003cscript>alert" in document


@pytest.mark.full
def test_the_cli_writes_the_report_and_refuses_a_folder(results_dir, tmp_path, capsys):
    (results_dir / MACHINE.name).mkdir(parents=True)
    shutil.copy(next(MACHINE.glob("iris-*.json")), results_dir / MACHINE.name)
    assert main(["report", "-o", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'r.html'}: ")
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert main(["report", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --output: {tmp_path} is a folder") and "Traceback" not in err
    assert main(["report", "-o", str(tmp_path / "nowhere" / "r.html")]) == 2
    assert "is not a folder" in capsys.readouterr().err
