import json

import pytest

from core import devices, settings
from core.model import profiles
from tests.helpers import page_text, render, shipped_runs

NOT_CALIBRATED = "not calibrated: run `python -m core calibrate`"
# two keys of a keyed field, as its pattern allows
KEYS_BY_PATTERN = {profiles.OP_NAME: ("tanh", "sort"), profiles.COUNT: ("64", "256"),
                   profiles.CLASS_NAME: ("Linear", "ReLU"), profiles.SHAPE: ("16x4x2", "1024x4x2"),
                   profiles.ONE_CHANNEL_INPUT: ("8x1x256", "8x1x16x16"), profiles.CONV_INPUT: ("8x16x256", "8x1x16x16")}


def made_profile(machine_id: str, gpus: tuple[str, ...] = ()) -> dict:
    """A valid profile made by hand: every field at the middle of its sane range (no measuring)."""
    def section(kind: str) -> dict:
        values = {}
        for field in profiles.fields_for(kind):
            middle = (field.low * field.high) ** 0.5
            small, large = KEYS_BY_PATTERN.get(profiles.KEYS.get(field.name), ("64", "256"))
            values[field.name] = {small: middle, large: middle * 2} if field.sized else middle
        return values
    fp = dict(devices.fingerprint(), machine_id=machine_id)
    return {"schema": 1, "machine_id": machine_id, "fingerprint": fp, "code_version": {"commit": "0123456789abcdef",
            "dirty": False}, "taken": "2026-01-02T03:04:05+00:00", "seconds": 42.0, "quick": False,
            "load_per_core": 0.1,
            "cpu": section("cpu"), "gpus": {gpu: section("cuda") for gpu in gpus}}


def profile_tables(at) -> list:
    return [d.value for d in at.dataframe if "what it is" in d.value.columns]


def test_a_machine_without_a_profile_is_invited_to_calibrate(results_dir):
    at = render("pages/machines.py")
    assert not at.exception
    assert NOT_CALIBRATED in page_text(at) and not profile_tables(at)


def test_a_calibrated_machine_shows_its_profile_table(results_dir):
    here = devices.fingerprint()["machine_id"]
    profile = made_profile(here, gpus=("cuda:0", "cuda:1"))
    profile["cpu"] |= {"op_call_seconds": {"tanh": 2e-6, "sort": 0.0}, "op_element_seconds": {"tanh": 1.5e-9, "sort": 3e-9},
                       "gemm_seconds": {"16x4x2": 2e-6, "1024x4x2": 9e-6}, "linear_seconds": {"16x4x2": 3e-6, "1024x4x2": 1e-5},
                       "flash_attention_seconds": {"32x32x8": 4e-6, "32x512x8": 2e-5},
                       "flash_attention_backward_seconds": {"32x32x8": 8e-6, "32x512x8": 6e-5}}
    profiles.save(profile)
    at = render("pages/machines.py")
    assert not at.exception
    [table] = profile_tables(at)
    assert list(table.columns) == ["device", "field", "size", "value", "what it is"]
    assert set(table["device"]) == {"cpu", "cuda:0", "cuda:1"}
    matmul = table[(table["device"] == "cpu") & (table["field"] == "matmul_flops")]
    assert list(matmul["size"]) == ["64", "256"] and list(matmul["value"]) == ["316 GFLOP/s", "632 GFLOP/s"]
    assert list(table[table["field"] == "sync_round_trip"]["value"]) == ["100 µs", "100 µs"]
    assert not set(table["field"]) & set(profiles.OP_FIGURES)  # the operations timed one by one have their own table
    assert not set(table["field"]) & set(profiles.GEMM_FIGURES)  # and so do the GEMM shapes
    [shapes] = [d.value for d in at.dataframe if "M" in d.value.columns]
    assert shapes[["M", "K", "N"]].values.tolist() == [[16, 4, 2], [1024, 4, 2]]
    assert shapes["torch.mm (µs)"].tolist() == pytest.approx([2.0, 9.0])
    assert shapes["nn.Linear's addmm (µs)"].tolist() == pytest.approx([3.0, 10.0])
    assert not set(table["field"]) & set(profiles.ATTENTION_FIGURES)  # nor the flash-attention blocks
    [blocks] = [d.value for d in at.dataframe if "query rows" in d.value.columns]
    assert blocks[["query rows", "key columns", "head size"]].values.tolist() == [[32, 32, 8], [32, 512, 8]]
    assert blocks["forward (µs)"].tolist() == pytest.approx([4.0, 20.0])
    assert blocks["backward (µs)"].tolist() == pytest.approx([8.0, 60.0])
    [timed] = [d.value for d in at.dataframe if "operation" in d.value.columns]
    assert list(timed.columns) == ["operation", "per call", "per element written"]
    assert timed.to_dict("records") == [{"operation": "tanh", "per call": "2.00 µs/call", "per element written": "1.50 ns/elem"},
                                        {"operation": "sort", "per call": "0.00 µs/call", "per element written": "3.00 ns/elem"}]
    caption = " ".join(c.value for c in at.caption)
    assert "taken 2026-01-02 03:04 UTC in 42 s by code 0123456789" in caption
    assert NOT_CALIBRATED not in page_text(at)


def test_other_machines_show_theirs_a_busy_one_is_flagged_and_a_malformed_one_named(results_dir):
    profiles.save(made_profile("elsewhere-1") | {"load_per_core": 2.0})
    broken = results_dir / "broken-1" / "calibration" / "profile.json"
    broken.parent.mkdir(parents=True)
    broken.write_text(json.dumps({"schema": 1}))
    at = render("pages/machines.py")
    assert not at.exception
    assert len(profile_tables(at)) == 1 and NOT_CALIBRATED in page_text(at)
    assert "**elsewhere-1**" in page_text(at)
    assert any(str(broken) in w.value for w in at.warning)
    assert any("busy when calibrated (load 2.0 per core)" in w.value for w in at.warning)


def test_read_only_hides_the_command(results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at = render("pages/machines.py")
    assert not at.exception
    text = page_text(at)
    assert "not calibrated" in text and "python -m core calibrate" not in text


def test_the_page_offers_a_bundle_and_imports_an_uploaded_one(results_dir, tmp_path, monkeypatch):
    import shutil
    from core.report import bundles
    shipped = settings.APP_ROOT / "results"
    machine, (run,) = shipped_runs("matmul")
    source = tmp_path / "source" / machine
    source.mkdir(parents=True)
    shutil.copy(shipped / machine / f"{run}.json", source)
    data, _ = bundles.export_bytes(results_dir=source.parent)
    at = render("pages/machines.py")
    assert not at.exception and not at.download_button  # nothing to bundle yet
    at.file_uploader[0].set_value(("from-the-lab.tar.gz", data, "application/gzip")).run()
    assert not at.exception
    assert at.success[0].value.startswith("from-the-lab.tar.gz: added 1, skipped 0, refused 0")
    assert "matmul" in at.dataframe[-1].value["experiment"].tolist()  # the runs table shows the imported run
    assert at.download_button[0].label.startswith("Download the bundle (1 run, 0 profiles")


@pytest.mark.full
def test_a_read_only_view_offers_the_download_but_no_upload(shipped_results, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at = render("pages/machines.py")
    assert not at.exception
    assert at.download_button and not at.file_uploader
    assert "the upload below" not in page_text(at)


def test_check_this_machine_starts_the_doctor_with_the_budget_picked(results_dir, monkeypatch):
    from core.commands import jobs
    started = []
    monkeypatch.setattr(jobs, "start_doctor", started.append)
    at = render("pages/machines.py")
    assert "Check this machine" in [s.value for s in at.subheader]
    at.select_slider[0].set_value(3).run()
    next(b for b in at.button if b.label == "Check this machine").click().run()
    assert not at.exception and started == [180.0]


def test_read_only_offers_no_check(results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at = render("pages/machines.py")
    assert "Check this machine" not in [s.value for s in at.subheader] + [b.label for b in at.button]
