"""Verdicts that a sceptic signs: intervals from the samples, 'too close to call', both CPU baselines, and pairs from
one machine only (issue 45). Records are built by hand: their figures are chosen, never timed here."""
import numpy as np
import pandas as pd
import pytest

from core import published
from core.commands.progress import point_outcome
from core.experiments.cnn.analysis import CLAIMS
from core.experiments.cnn.experiment import AS_WRITTEN
from core.present import analysis, stats
from core.present.analysis import NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE
from core.store import results

SMALL_DATA = CLAIMS[0]   # "the CPU trains the 1-D model faster on small data": reproduced when the speedup is below 1
POINTS = [{"model": "cnn1d", "batch_size": 512, "rows": rows} for rows in (1024, 4096, 16384)]


def spread(seconds: float, relative: float, n: int = 7) -> list[float]:
    """`n` samples about `seconds`, `relative` apart at the ends, the median exactly `seconds`."""
    return list(seconds * (1 + relative * np.linspace(-1, 1, n)))


def row(device: str, seconds: float, relative: float = 0.01, threads: int = 16, setting: str = "default",
        params: dict = None) -> dict:
    samples = spread(seconds, relative)
    return {"device": device, "variant": AS_WRITTEN, "params": params, "status": "ok", "unit": "epoch",
            "per_call": 1, "median": float(np.median(samples)), "iqr": None, "noisy": False, "n": len(samples),
            "samples": samples, "torch_threads": threads, "threads_setting": setting}


def record(rows: list[dict], machine: str = "xeon-16", gpu: bool = True, run_id: str = "cnn-1") -> dict:
    fingerprint = {"cpu_model": "Xeon", "cpu_logical_cores": 16, "torch_threads": 16, "machine_id": machine,
                   "gpus": [{"device": "cuda:0", "name": "H200"}] if gpu else []}
    return {"schema": results.SCHEMA_VERSION, "run_id": run_id, "experiment": "cnn", "preset": "quick",
            "status": "complete", "machine_id": machine, "fingerprint": fingerprint, "config": {}, "rows": rows,
            "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:01:00+00:00", "planned_points": len(rows)}


def verdict(records: list[dict]):
    return analysis.evaluate(SMALL_DATA, results.rows_frame(records, "cnn"), published.load("cnn"))


def gpu_machine(gpu_s: float, cpu16_s: float, cpu2_s: float = None, relative: float = 0.01) -> dict:
    """A GPU machine's record: every point on its GPU, on its CPU at torch's default 16 threads and, given
    `cpu2_s`, at 2 threads."""
    rows = []
    for params in POINTS:
        rows += [row("cuda:0", gpu_s, relative, params=params), row("cpu", cpu16_s, relative, params=params)]
        if cpu2_s is not None:
            rows.append(row("cpu", cpu2_s, relative, threads=2, setting="2", params=params))
    return record(rows)


def test_a_verdict_names_the_default_threads_baseline_and_the_faster_one():
    """A 16-thread CPU slower than the same CPU at 2 threads: the outcome follows the write-up's baseline (the
    default threads, as it ran), and the verdict says what the faster setting changes."""
    found = verdict([gpu_machine(gpu_s=0.4, cpu16_s=0.92, cpu2_s=0.3)])
    assert found.outcome == NOT_REPRODUCED  # the GPU is 2.3x faster than the 16-thread CPU
    assert "default 16 threads the GPU is 2.30x" in found.evidence and "faster" in found.evidence
    assert "fastest thread setting measured (2 threads) 1.33x" in found.evidence and "slower" in found.evidence
    assert found.basis == "measured" and "95% CI" in found.interval


def test_a_verdict_says_when_only_the_default_threads_were_measured():
    found = verdict([gpu_machine(gpu_s=0.4, cpu16_s=0.2)])
    assert found.outcome == REPRODUCED
    assert "only the default threads were measured" in found.evidence


def test_a_figure_whose_interval_straddles_the_threshold_is_too_close_to_call():
    """Medians a hair apart (the CPU 2% faster) with samples 30% apart: a rerun could put the median either side."""
    found = verdict([gpu_machine(gpu_s=1.0, cpu16_s=0.98, relative=0.3)])
    assert found.outcome == TOO_CLOSE
    assert "straddles the threshold 1.00x" in found.evidence
    low, high = (float(x) for x in found.interval.split("95% CI ")[1].rstrip(")x").split("–"))
    assert low < 1 < high


def test_the_same_medians_with_tight_samples_are_decided():
    assert verdict([gpu_machine(gpu_s=1.0, cpu16_s=0.98, relative=0.001)]).outcome == REPRODUCED


def test_a_gpu_is_never_paired_with_another_machines_cpu():
    """A GPU measured without its machine's CPU, beside a CPU-only machine: no pair, and the verdict says what is
    missing on which machine."""
    gpu_only = record([row("cuda:0", 0.4, params=p) for p in POINTS], machine="h200-host")
    cpu_only = record([row("cpu", 0.2, params=p) for p in POINTS], machine="laptop", gpu=False, run_id="cnn-2")
    found = verdict([gpu_only, cpu_only])
    assert found.outcome == NO_DATA
    assert "On Xeon" in found.evidence and "without that machine's CPU" in found.evidence


def test_a_run_that_swept_no_default_threads_is_compared_at_its_first_setting():
    rows = [row("cpu", 0.3, threads=1, setting="1", params=POINTS[0]), row("cuda:0", 0.4, params=POINTS[0])]
    pairs = analysis.pair(results.rows_frame([record(rows)], "cnn"))
    assert len(pairs) == 1 and pairs["cpu_torch_threads"].iloc[0] == 1


def test_the_interval_of_a_ratio_comes_from_both_sides_samples():
    frame = pd.DataFrame({"median_s": [1.0], "samples_s": [spread(1.0, 0.2)], "cpu_median_s": [2.0],
                          "cpu_samples_s": [spread(2.0, 0.0)]})
    found = stats.ratio(frame, "cpu_median_s", "median_s")
    assert found.value == pytest.approx(2.0) and found.low < 2.0 < found.high
    tight = stats.ratio(frame.assign(samples_s=[spread(1.0, 0.0)]), "cpu_median_s", "median_s")
    assert (tight.low, tight.high) == pytest.approx((2.0, 2.0))


def test_a_single_sample_point_is_not_resampled_and_says_so():
    frame = pd.DataFrame({"median_s": [1.0], "samples_s": [[1.0]], "cpu_median_s": [2.0], "cpu_samples_s": [[2.0]]})
    found = stats.ratio(frame, "cpu_median_s", "median_s")
    assert (found.low, found.high) == (2.0, 2.0) and "not resampled" in found.text()


def test_the_single_sample_points_of_a_ratio_are_counted_once_each():
    """A pair has two sides: the H200's smoke points, one sample a side, read '4 of 2 point(s) one sample'."""
    frame = pd.DataFrame({"median_s": [1.0, 1.0, 1.0], "samples_s": [[1.0], [1.0], spread(1.0, 0.1)],
                          "cpu_median_s": [2.0, 3.0, 2.0], "cpu_samples_s": [[2.0], spread(3.0, 0.1), [2.0]]})
    assert "; 3 of 3 point(s) one sample, not resampled" in stats.ratio(frame, "cpu_median_s", "median_s").text()
    two_sided = frame.assign(samples_s=[spread(1.0, 0.1)] * 3, cpu_samples_s=[spread(2.0, 0.1)] * 2 + [[2.0]])
    assert "; 1 of 3 point(s) one sample" in stats.ratio(two_sided, "cpu_median_s", "median_s").text()


def test_a_point_line_shows_the_medians_interval():
    line = point_outcome(row("cpu", 0.5, relative=0.1) | {"unit": "epoch"})
    assert "95% CI" in line and "n=7" in line


def test_the_run_command_and_the_doctor_say_each_verdict_with_its_basis_and_interval():
    from core import devices
    from core.report import overview
    here = devices.fingerprint()["machine_id"]
    mine = gpu_machine(gpu_s=0.4, cpu16_s=0.92, cpu2_s=0.3) | {"machine_id": here}
    lines = [overview.verdict_line(v) for _, v in overview.verdicts_here([mine], ["cnn"])]
    line = next(line for line in lines if SMALL_DATA.text in line)
    assert line.startswith(f"{NOT_REPRODUCED} (rests on measurements; 2.30x (95% CI ")
    gru = next(line for line in lines if "GRU" in line)
    assert gru.startswith(f"{NO_DATA} (no figure)") and "No results for gru" in gru


def test_a_verdict_states_the_gpus_precision_as_recorded():
    older = verdict([gpu_machine(gpu_s=0.4, cpu16_s=0.2)])
    assert "predate precision control" in older.evidence and "TF32" in older.evidence
    fp32 = gpu_machine(gpu_s=0.4, cpu16_s=0.2)
    fp32["rows"] = [r | ({"tf32_matmul": False, "tf32_cudnn": False, "cudnn_benchmark": False}
                         if r["device"] != "cpu" else {}) for r in fp32["rows"]]
    assert "The GPU ran in FP32" in verdict([fp32]).evidence
