import numpy as np
import pandas as pd
import pytest
import torch

from core import results, runner
from core.experiments import matmul
from core.results import RecordWriter
from core.verdicts import NEEDS_GPU, NOT_REPRODUCED, REPRODUCED

EXP = matmul.EXPERIMENT


def test_cpu_plans_only_cpu_variants_and_a_gpu_plans_the_rest():
    config = EXP.config("smoke")
    cpu = {p.variant for p in EXP.points(config, "cpu")}
    gpu = {p.variant for p in EXP.points(config, "cuda:0")}
    assert cpu == {"numpy", "torch cpu"}
    assert gpu == set(matmul.GPU_PRODUCTS) | set(matmul.TRANSFERS)
    assert {p.params["size"] for p in EXP.points(config, "cpu")} == set(config["sizes"])


def test_smoke_run_measures_products_that_agree_with_numpy(results_dir):
    config = EXP.config("smoke", {"sizes": (16, 200)})
    writer = RecordWriter("matmul", "smoke", config, ["cpu"])
    assert runner.run(EXP, config, ["cpu"], writer) == "complete"
    rows = results.rows_frame(results.load_records(), "matmul")
    assert len(rows) == 4 and (rows["point_status"] == "ok").all()
    assert (rows["gflop_per_s"] > 0).all() and (rows["torch_threads"] == torch.get_num_threads()).all()
    assert rows["max_rel_diff_vs_numpy"].max() < 1e-5
    assert rows["samples_s"].map(len).eq(config["repeats"]).all()


def _rows(times: dict) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": "r1", "machine": "m", "device": "cpu" if v in ("numpy", "torch cpu") else "cuda:0",
                          "variant": v, "size": n, "median_s": t, "point_status": "ok"}
                         for v, by_size in times.items() for n, t in by_size.items()])


def test_crossover_is_the_first_size_from_which_the_gpu_always_wins():
    rows = _rows({"numpy": {16: 1.0, 64: 2.0, 200: 4.0, 512: 8.0},
                  "torch resident": {16: 5.0, 64: 1.0, 200: 5.0, 512: 2.0},
                  "torch copy pageable": {16: 9.0, 64: 9.0, 200: 9.0, 512: 9.0}})
    found = matmul.crossovers(rows).set_index("variant")["crossover_size"]
    assert found["torch resident"] == 512  # wins at 64, loses at 200, wins from 512 on
    assert pd.isna(found["torch copy pageable"])


def test_verdicts_need_a_gpu_then_compare_with_the_published_ratio():
    published = results.load_published("matmul")
    cpu_only = _rows({"numpy": {200: 1.0}, "torch cpu": {200: 1.0}})
    assert [v.outcome for v in matmul.verdicts(cpu_only, published)] == [NEEDS_GPU, NEEDS_GPU]
    with_gpu = _rows({"numpy": {200: 6.0}, "torch resident": {200: 1.0}, "torch copy pageable": {200: 30.0}})
    resident, copied = matmul.verdicts(with_gpu, published)
    assert resident.outcome == REPRODUCED and "6.00x" in resident.evidence
    assert copied.outcome == NOT_REPRODUCED and "0.20x" in copied.evidence


def test_gpu_workloads_are_planned_with_the_right_bytes_on_any_machine():
    a, b = matmul.operands(8, 0)
    fn, nbytes = matmul._workload("numpy", "cpu", a, b)
    np.testing.assert_allclose(fn(), a @ b)
    assert nbytes == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU variants need a CUDA device")
def test_gpu_variants_agree_with_numpy_and_move_the_bytes_they_claim():
    a, b = matmul.operands(64, 0)
    for variant in matmul.GPU_PRODUCTS:
        fn, nbytes = matmul._workload(variant, "cuda:0", a, b)
        assert matmul._rel_diff(fn(), a @ b) < 1e-4
        assert nbytes == (3 * a.nbytes if "copy" in variant else 0)
    for variant in matmul.TRANSFERS:
        fn, nbytes = matmul._workload(variant, "cuda:0", a, b)
        fn()
        torch.cuda.synchronize()
        assert nbytes == a.nbytes
