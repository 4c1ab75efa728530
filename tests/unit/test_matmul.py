import tracemalloc

import numpy as np
import pandas as pd
import pytest
import torch

from core import devices, published
from core.measure import runner
from core.present.analysis import NEEDS_GPU, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE
from core.measure.experiment import Point, RunState
from core.experiments.matmul import analysis, experiment as matmul
from tests.helpers import hand_rows, smoke_rows

EXP = matmul.EXPERIMENT
CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]


def test_cpu_plans_only_cpu_variants_and_a_gpu_plans_the_rest():
    config = EXP.config("smoke")
    cpu = {p.variant for p in EXP.points(config, "cpu")}
    gpu = {p.variant for p in EXP.points(config, "cuda:0")}
    assert cpu == {"numpy", "torch cpu"}
    assert gpu == set(matmul.GPU_PRODUCTS) | set(matmul.TRANSFERS)
    assert {p.params["size"] for p in EXP.points(config, "cpu")} == set(config["sizes"])


@pytest.mark.full
def test_smoke_run_measures_products_that_agree_with_numpy():
    config = EXP.config("smoke")
    rows = smoke_rows("matmul", sizes=(16, 200))
    assert len(rows) == 4 and (rows["point_status"] == "ok").all()
    assert (rows["gflop_per_s"] > 0).all() and (rows["torch_threads"] == torch.get_num_threads()).all()
    assert rows["max_rel_diff_vs_numpy"].max() < 1e-5
    assert rows["samples_s"].map(len).eq(config["repeats"]).all()
    assert set(rows["per_sample"]) == {"one product"}


def _rows(times: dict) -> pd.DataFrame:
    return hand_rows([{"device": "cpu" if v in ("numpy", "torch cpu") else "cuda:0", "variant": v, "size": n,
                       "median_s": t} for v, by_size in times.items() for n, t in by_size.items()], ("size",))


def test_crossover_is_the_first_size_from_which_the_gpu_always_wins():
    rows = _rows({"numpy": {16: 1.0, 64: 2.0, 200: 4.0, 512: 8.0},
                  "torch resident": {16: 5.0, 64: 1.0, 200: 5.0, 512: 2.0},
                  "torch copy pageable": {16: 9.0, 64: 9.0, 200: 9.0, 512: 9.0}})
    found = analysis.crossover_sizes(rows).set_index("variant")["crossover_size"]
    assert found["torch resident"] == 512  # wins at 64, loses at 200, wins from 512 on
    assert pd.isna(found["torch copy pageable"])


def test_verdicts_need_a_gpu_then_compare_with_the_published_ratio():
    figures = published.load("matmul")
    cpu_only = _rows({"numpy": {200: 1.0}, "torch cpu": {200: 1.0}})
    assert [v.outcome for v in EXP.verdicts(cpu_only, figures)] == [NEEDS_GPU, NEEDS_GPU]
    with_gpu = _rows({"numpy": {200: 6.0}, "torch resident": {200: 1.0}, "torch copy pageable": {200: 30.0}})
    resident, copied = EXP.verdicts(with_gpu, figures)
    assert resident.outcome == REPRODUCED and "6.00x" in resident.evidence and resident.basis == "measured"
    assert copied.outcome == NOT_REPRODUCED and "0.20x" in copied.evidence
    assert "K80" in resident.evidence  # the published figure's hardware, from core/published.json


def _sampled_rows(relative: float) -> pd.DataFrame:
    """numpy 3.15x slower than the resident product and 2.1x slower than the copying one, at the edges of the
    published figures' factor-of-2 ranges (6x: 3 to 12; 1x: 0.5 to 2), every point's samples `relative` apart."""
    spread = lambda t: [t * (1 + relative * x) for x in (-1, -0.5, 0, 0.5, 1)]
    times = {"numpy": 6.3, "torch resident": 2.0, "torch copy pageable": 3.0}
    return hand_rows([{"device": "cpu" if v == "numpy" else "cuda:0", "variant": v, "size": analysis.CLAIM_SIZE,
                       "median_s": t, "samples_s": spread(t)} for v, t in times.items()], ("size",))


def test_the_claims_are_decided_on_the_interval_of_numpys_time_over_the_products():
    figures = published.load("matmul")
    resident, copied = EXP.verdicts(_sampled_rows(0.3), figures)
    assert resident.outcome == copied.outcome == TOO_CLOSE
    assert "straddles the threshold 3.00x" in resident.evidence and "straddles the threshold 2.00x" in copied.evidence
    resident, copied = EXP.verdicts(_sampled_rows(0.01), figures)
    assert (resident.outcome, copied.outcome) == (REPRODUCED, NOT_REPRODUCED)
    assert resident.interval.startswith("3.15x (95% CI 3.") and copied.interval.startswith("2.10x (95% CI 2.")


def test_the_gain_table_carries_each_products_interval():
    found = analysis.gain_table(_sampled_rows(0.3)).set_index("variant")
    low, high = (float(x) for x in found.loc["torch resident", "gain_ci"].rstrip("x").split("–"))
    assert found.loc["torch resident", "gain"] == pytest.approx(3.15) and low < 3.15 < high
    tight = analysis.gain_table(_sampled_rows(0.0)).set_index("variant")
    assert tight.loc["torch copy pageable", "gain_ci"] == "2.10–2.10x"
    table = next(t for title, t in EXP.tables(_sampled_rows(0.3)).items() if "relative to numpy" in title)
    assert "95% CI" in table.columns


def test_the_claim_texts_take_their_figures_from_published_json():
    resident = published.entry("matmul-200-speedup.gpu.size200.torch-resident")
    assert f"{resident['value']:g}x" in EXP.verdicts(_rows({}), published.load("matmul"))[0].claim
    assert f"{resident['value']:g}x" in EXP.about()["Claim"]


def test_the_cpu_workloads_compute_the_product_and_move_no_bytes():
    a, b = matmul.operands(8, 0)
    for variant in ("numpy", "torch cpu"):
        fn, nbytes = matmul.call(variant, "cpu", a, b)
        assert matmul.rel_diff(matmul.host_result(fn(), "cpu"), a @ b) < 1e-6
        assert nbytes == 0


@pytest.mark.skipif(not CUDA_DEVICES, reason="the GPU variants need a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_gpu_variants_agree_with_numpy_and_move_the_bytes_they_claim(device):
    a, b = matmul.operands(64, 0)
    for variant in matmul.GPU_PRODUCTS:
        fn, nbytes = matmul.call(variant, device, a, b)
        assert matmul.rel_diff(matmul.host_result(fn(), device), a @ b) < 1e-4
        assert nbytes == (3 * a.nbytes if "copy" in variant else 0)
    for variant in matmul.TRANSFERS:
        fn, nbytes = matmul.call(variant, device, a, b)
        out = matmul.host_result(fn(), device)
        assert nbytes == a.nbytes
        np.testing.assert_allclose(out, a)


# -- the memory guard -------------------------------------------------------------------------------
MATRIX = 4 * 256 * 256  # bytes of one 256 x 256 float32 matrix
SLACK = matmul.HOST_SLACK_BYTES


def test_the_estimate_counts_the_operands_unless_the_last_point_made_them():
    assert matmul.memory_need("cpu", 256, resident=False) == (4 * MATRIX, 2 * MATRIX + SLACK)
    assert matmul.memory_need("cpu", 256, resident=True) == (4 * MATRIX, SLACK)
    assert matmul.memory_need("cuda:0", 256, resident=False) == (5 * MATRIX, 9 * MATRIX + SLACK)
    config = EXP.config("smoke")
    run = RunState()
    first = EXP.workload(Point("cpu", "numpy", {"size": 256}), config, run).metrics["estimated_bytes"]
    again = EXP.workload(Point("cpu", "torch cpu", {"size": 256}), config, run).metrics["estimated_bytes"]
    other = EXP.workload(Point("cpu", "numpy", {"size": 64}), config, run).metrics["estimated_bytes"]
    assert (first, again) == (6 * MATRIX + SLACK, 4 * MATRIX + SLACK) and other == 6 * 4 * 64 * 64 + SLACK


def test_the_estimate_covers_the_traced_peak_of_a_numpy_point():
    """numpy reports its allocations to tracemalloc: the point's real peak, operands made afresh included."""
    config = EXP.config("smoke", {"seed": 4242, "repeats": 1})  # a seed no other test uses: no cached operands
    tracemalloc.start()
    try:
        row = runner.measure_point(EXP, Point("cpu", "numpy", {"size": 256}), config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert row["status"] == "ok" and row["metrics"]["estimated_bytes"] == 6 * MATRIX + SLACK
    assert 6 * MATRIX <= peak <= 6 * MATRIX + SLACK  # the six matrices counted, and the slack covers the rest


def test_a_point_that_would_not_fit_is_skipped_before_its_operands_exist(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 7.5e9)
    monkeypatch.setattr(matmul, "operands", lambda n, seed: pytest.fail("the operands were made"))
    row = runner.measure_point(EXP, Point("cpu", "numpy", {"size": 16384}), EXP.config("smoke"))
    assert row["status"] == "skipped" and "memory_fraction" in row["error"] and "6.51 GB" in row["error"]
    assert row["metrics"] == {"estimated_bytes": 6 * 4 * 16384**2 + SLACK, "free_bytes": 7.5e9}
    with pytest.raises(pytest.fail.Exception, match="the operands were made"):  # all of the free memory: let through
        EXP.workload(Point("cpu", "numpy", {"size": 16384}), EXP.config("smoke", {"memory_fraction": 1.0}), RunState())
