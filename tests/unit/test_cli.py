import json
import os
import platform
import subprocess
import sys

import pytest

from core import results, settings
from core.cli import main


def test_info_prints_the_fingerprint():
    out = subprocess.run([sys.executable, "-m", "core", "info"], cwd=settings.APP_ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out)["machine_id"]


def test_list_names_parameters_presets_and_variants(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "matmul:" in out and "--set sizes=" in out and "preset smoke:" in out and "variant 'numpy'" in out


def test_bad_input_exits_non_zero_naming_the_field(capsys, results_dir):
    cases = {("run", "nope"): "experiment: 'nope' is unknown",
             ("run", "matmul", "--preset", "huge"): "preset: 'huge' is not one of",
             ("run", "matmul", "--set", "sizes=0"): "sizes: 0 is out of range; allowed:",
             ("run", "matmul", "--set", "repeats"): "--set: 'repeats' is not NAME=VALUE",
             ("run", "matmul", "--set", "bogus=1"): "bogus: unknown parameter",
             ("run", "matmul", "--device", "cuda:9"): "device: 'cuda:9' is not present",
             ("run", "matmul", "--set", "repeats=2", "--set", "repeats=3"): "repeats: given twice with --set",
             ("run", "matmul", "--set", "sizes=16,16"): "sizes: 16 is given twice; allowed:",
             ("run", "matmul", "--set", "block_seconds=nan"): "block_seconds: 'nan' is not a finite number; allowed:",
             ("run", "matmul", "--config-json", '{"repeats": 2}', "--set", "repeats=3"):
                 "repeats: given both in --config-json and with --set",
             ("run", "matmul", "--config-json", '{"repeats": 2, "repeats": 3}'): "--config-json: 'repeats' is given twice",
             ("run", "matmul", "--config-json", '{"block_seconds": NaN}'): "block_seconds: nan is not a finite number"}
    for argv, message in cases.items():
        assert main(list(argv)) == 2, argv
        assert message in capsys.readouterr().err
    assert not list(results_dir.glob("*/*.json"))


def test_run_writes_a_complete_record_measuring_a_repeated_device_once(capsys, results_dir):
    assert main(["run", "matmul", "--device", "cpu", "--device", "cpu", "--preset", "smoke", "--set", "sizes=8,16",
                 "--set", "variants=numpy"]) == 0
    out = capsys.readouterr().out
    assert "[2/2] cpu numpy size=16: median" in out
    [record] = results.load_records(results_dir)
    assert record["status"] == "complete" and [r["params"]["size"] for r in record["rows"]] == [8, 16]
    assert record["devices"] == ["cpu"]
    assert record["config"]["variants"] == ["numpy"]


def test_read_only_refuses_to_run(capsys, results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    assert main(["run", "matmul", "--preset", "smoke"]) == 2
    assert "read-only" in capsys.readouterr().err
    assert not list(results_dir.glob("*/*.json"))


def test_variants_that_leave_no_point_on_the_devices_are_an_error(capsys, results_dir):
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke", "--set", "variants=torch resident"]) == 2
    err = capsys.readouterr().err
    assert "variants: no point to measure: cpu cannot run torch resident (it runs numpy, torch cpu)" in err
    assert not list(results_dir.glob("*/*.json"))


def test_the_checked_configuration_travels_as_json(capsys, results_dir):
    config = json.dumps({"sizes": [8, 16], "variants": ["numpy"]})
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke", "--config-json", config]) == 0
    [record] = results.load_records(results_dir)
    assert record["config"]["sizes"] == [8, 16] and record["config"]["variants"] == ["numpy"]
    assert main(["run", "matmul", "--config-json", "{not json"]) == 2
    assert "--config-json: not JSON" in capsys.readouterr().err


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the malloc setting is glibc's")
def test_a_run_from_the_shell_gets_the_malloc_setting_its_experiment_asks_for(results_dir):
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    subprocess.run([sys.executable, "-m", "core", "run", "jacobian", "--device", "cpu", "--preset", "smoke",
                    "--set", "vals=2", "--set", "per_sample_vals=4", "--set", "variants=tuned"],
                   cwd=settings.APP_ROOT, env=env, check=True, capture_output=True, timeout=300)
    [record] = results.load_records(results_dir)
    assert record["environment"]["MALLOC_MMAP_THRESHOLD_"] == "65536"  # matmul's run gets none: see test_jobs


def test_argparse_errors_clip_what_they_echo(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["run", "matmul", "--bogus" + "x" * 100_000])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "unrecognized arguments" in err and len(err) < 1000
