"""A model described with the form, answered (core.predict.yourmodel): real families on the meta device, the
catalogue's hardware (a catalogue CPU as the host, so no profile of this machine is read), and an empty results
folder (no error bands) unless a test saves some."""
import hashlib
import json

import pandas as pd
import pytest

from core import devices
from core.model import costmodel, hardware, whatifs
from core.predict import families, uncertainty, yourmodel
from core.predict.uncertainty import Band
from core.predict.yourmodel import SWEEP_COLUMNS, Timed, WhatIf

SIZES = {"depth": 2, "width": 32, "in_features": 8}  # Linear 8 -> 32, ReLU, Linear 32 -> 1


def mlp(batch: int = 10, **values):
    return families.describe("mlp", SIZES | {"batch": batch} | values)


@pytest.fixture(scope="module", autouse=True)
def warm():
    """The first census of a process sets torch's meta dispatch up (about a second): once, before the tests."""
    yourmodel.census(mlp(), 10, False)


@pytest.fixture
def cpu_name() -> str:
    return next(row["name"] for row in hardware.listing() if row["kind"] == "cpu" and row["origin"] == "catalogue")


@pytest.fixture
def cpu(cpu_name) -> hardware.Target:
    return hardware.resolve(cpu_name)


@pytest.fixture
def t4(cpu_name) -> hardware.Target:
    return hardware.resolve("t4", host=cpu_name)


# -- the answer ----------------------------------------------------------------------------------------------------

def test_the_gpu_s_census_copies_the_input_in_from_pageable_memory_and_the_cpu_s_does_not():
    # 10 rows of 8 float32 values: 320 bytes
    on_gpu, on_cpu = yourmodel.census(mlp(), 10, True), yourmodel.census(mlp(), 10, False)
    assert [o["copy"] for o in on_gpu["ops"] if o["copy"]] == [{"direction": "h2d", "pinned": False, "bytes": 320}]
    assert not any(o["copy"] for o in on_cpu["ops"])


def test_the_answer_predicts_the_census_on_each_target_and_the_gpu_s_speedup(cpu, t4):
    described = mlp()
    found = yourmodel.answer(described, cpu, [t4])
    gpu_s = costmodel.predict(yourmodel.census(described, 10, True), t4).seconds
    cpu_s = costmodel.predict(yourmodel.census(described, 10, False), cpu).seconds
    (on_gpu,) = found.gpus
    assert (on_gpu.hardware, on_gpu.device, on_gpu.batch) == (t4.title, "t4", 10)
    assert on_gpu.seconds == gpu_s and found.cpu.seconds == cpu_s
    assert on_gpu.per_sample == pytest.approx(gpu_s / 10)
    assert on_gpu.likely is None and found.cpu.likely is None  # no error bands in this results folder
    assert on_gpu.regime == "host-bound"  # a 300-parameter MLP: the host's dispatch and launches dominate
    speedup = found.speedups[t4.title]
    assert speedup == {"speedup": pytest.approx(cpu_s / gpu_s), "low": None, "high": None,
                       "verdict": uncertainty.NO_RANGE, "basis": None}
    memory = found.memory[t4.title]
    assert memory["fits"] is True and memory["held_gib"] == 16.0 and 0 < memory["needed_gib"] < 16.0


def test_saved_error_bands_give_the_likely_range_and_the_speedup_s(cpu, t4):
    # a predicted t likely measures t / high to t / low: the CPU's band 0.8-1.25, the GPU's any-regime band
    # 0.5-2.0 and its host-bound one 0.25-4.0 (the GPU's regime here: preferred)
    uncertainty.save([Band("cpu", "any", 0.8, 1.25, 10), Band("cuda", "any", 0.5, 2.0, 10),
                      Band("cuda", "host-bound", 0.25, 4.0, 6)])
    found = yourmodel.answer(mlp(), cpu, [t4])
    c, (g,) = found.cpu.seconds, [t.seconds for t in found.gpus]
    assert found.cpu.likely == pytest.approx((c / 1.25, c / 0.8))
    assert found.gpus[0].likely == pytest.approx((g / 4.0, g / 0.25))
    # the speedup's range: the CPU's fastest over the GPU's slowest, (c / 1.25) / (g / 0.25) = 0.2 c / g, and its
    # slowest over the GPU's fastest, (c / 0.8) / (g / 4) = 5 c / g
    speedup = found.speedups[t4.title]
    assert (speedup["low"], speedup["high"]) == pytest.approx((0.2 * c / g, 5 * c / g))
    # a saved band of predicted over measured speedups, for the GPU point's regime, ranges the speedup itself:
    # predicted speedups of 1.5x to 3x what was measured put it at (c / g) / 3 to (c / g) / 1.5
    uncertainty.save(uncertainty.load() + [Band(uncertainty.SPEEDUP, "device-bound", 0.9, 1.1, 8),
                                           Band(uncertainty.SPEEDUP, "host-bound", 1.5, 3.0, 9)])
    speedup = yourmodel.answer(mlp(), cpu, [t4]).speedups[t4.title]
    assert (speedup["low"], speedup["high"]) == pytest.approx((c / g / 3.0, c / g / 1.5))
    assert speedup["basis"] == uncertainty.SPEEDUP


# -- the sweep and its crossovers ----------------------------------------------------------------------------------

def test_the_sweep_has_a_row_per_batch_and_target_and_each_row_is_the_census_at_that_batch(cpu, t4):
    swept = yourmodel.sweep(mlp(10), cpu, [t4])
    assert list(swept.columns) == SWEEP_COLUMNS
    batches = [2 ** i for i in range(4)] + [10] + [2 ** i for i in range(4, 17)]  # 1 .. 65,536 and the batch described
    assert len(swept) == 2 * len(batches)
    for kind, title in (("cpu", cpu.title), ("gpu", t4.title)):
        rows = swept[swept["hardware"] == title]
        assert rows["batch"].tolist() == batches and set(rows["kind"]) == {kind}
    assert swept[swept["kind"] == "cpu"]["fits"].all()
    assert swept[swept["kind"] == "gpu"]["fits"].all()  # 65,536 x 8 floats and a tiny MLP fit 16 GiB
    row = swept[(swept["batch"] == 64) & (swept["kind"] == "gpu")].iloc[0]
    expected = yourmodel.timed(yourmodel.census(mlp(64), 64, True), t4, 64, [])
    assert row["per_sample_s"] == pytest.approx(expected.seconds / 64)
    assert row["low_s"] == row["high_s"] == row["per_sample_s"]  # no band: the range is the point


def frame(cpu: dict, **gpus) -> pd.DataFrame:
    """A sweep's rows: the CPU's per-sample seconds by batch, and each GPU's (seconds, fits) by batch."""
    rows = [{"batch": b, "hardware": "CPU", "kind": "cpu", "per_sample_s": s, "low_s": s, "high_s": s, "fits": True}
            for b, s in cpu.items()]
    rows += [{"batch": b, "hardware": title, "kind": "gpu", "per_sample_s": s, "low_s": s, "high_s": s, "fits": fits}
             for title, points in gpus.items() for b, (s, fits) in points.items()]
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


BATCHES = (1, 4, 16, 64, 256)
CPU = dict.fromkeys(BATCHES, 1.0)  # a second a sample at every batch


def gpu_points(*seconds, fits=(True,) * 5) -> dict:
    return {b: (s, f) for b, s, f in zip(BATCHES, seconds, fits)}


def test_a_gpu_crosses_over_where_it_is_faster_from_there_on():
    swept = frame(CPU, steady=gpu_points(2, 2, 2, 0.5, 0.5),  # faster from 64 on
                  fickle=gpu_points(2, 2, 0.5, 2, 0.5),  # faster at 16, slower at 64, faster again at 256
                  never=gpu_points(2, 2, 2, 2, 1.0),  # a tie at 256 is not faster
                  full=gpu_points(2, 2, 0.5, 0.5, 3, fits=(True, True, True, True, False)),  # 256 does not fit
                  nowhere=gpu_points(0.5, 0.5, 0.5, 0.5, 0.5, fits=(False,) * 5))  # faster, but never fits
    assert yourmodel.crossovers(swept) == {"steady": 64, "fickle": 256, "never": None, "full": 16, "nowhere": None}


def test_the_largest_fitting_batch_of_each_gpu():
    swept = frame(CPU, roomy=gpu_points(2, 2, 2, 2, 2),
                  small=gpu_points(2, 2, 2, 2, 2, fits=(True, True, True, False, False)),
                  none=gpu_points(2, 2, 2, 2, 2, fits=(False,) * 5))
    assert yourmodel.largest_fitting(swept) == {"roomy": 256, "small": 16, "none": None}


# -- what-ifs ------------------------------------------------------------------------------------------------------

NAMES = [yourmodel.EAGER, whatifs.GRAPH, whatifs.FUSION, whatifs.PINNED, whatifs.HALF, yourmodel.LARGER_BATCH]


def test_the_what_ifs_are_the_eager_call_and_each_fix_s_rewrite_predicted(t4):
    described = mlp(10)
    found = yourmodel.what_ifs(described, t4)
    assert [w.name for w in found] == NAMES
    assert all(w.timed is not None and w.why == "" for w in found)
    eager = yourmodel.census(described, 10, True)
    assert found[0].timed.seconds == costmodel.predict(eager, t4).seconds
    for what, rewrite in zip(found[1:4], (whatifs.as_graph, whatifs.fused, whatifs.pinned)):
        assert what.timed.seconds == costmodel.predict(rewrite(eager), t4).seconds, what.name
    half = hardware.Target(t4.host, whatifs.half_gpu(t4.gpu))
    assert found[4].timed.seconds == costmodel.predict(whatifs.half_precision(eager), half).seconds
    assert found[1].how.startswith("a CUDA graph: the step captured once and replayed")
    assert found[2].how.startswith("torch.compile's fusion (Crossover's model of Inductor)")


def test_the_larger_batch_is_its_call_s_time_per_sample_times_the_batch_described(t4):
    found = yourmodel.what_ifs(mlp(10), t4)[-1]
    # 4 x 10 = 40 rows a call; 10 of them are a quarter of its time
    larger = costmodel.predict(yourmodel.census(mlp(40), 40, True), t4)
    assert found.timed.batch == 10
    assert found.timed.seconds == pytest.approx(larger.seconds * 10 / 40)
    assert found.timed.parts == pytest.approx({part: s / 4 for part, s in larger.parts.items()})
    assert found.timed.gpu_idle == pytest.approx(larger.gpu_idle / 4)


def test_a_larger_batch_past_the_form_s_largest_is_not_predicted(t4):
    found = yourmodel.what_ifs(mlp(65_536), t4)[-1]
    assert found.name == yourmodel.LARGER_BATCH and found.timed is None
    assert "262,144" in found.why  # 4 x 65,536


def test_a_gpu_without_a_float16_peak_has_no_mixed_precision_entry(cpu_name):
    k80 = hardware.resolve("k80", host=cpu_name)
    found = yourmodel.what_ifs(mlp(10), k80)
    assert [w.name for w in found] == NAMES
    half = found[4]
    assert half.timed is None and "float16" in half.why and k80.gpu.title in half.why
    assert all(w.timed is not None for i, w in enumerate(found) if i != 4)


def timed(seconds: float, regime: str = "host-bound", gpu_idle: float = 0.0, **parts) -> Timed:
    return Timed("T4 driven by a CPU", "t4", 10, seconds, None, regime, parts, gpu_idle)


def fixes(graph, fusion, pinned, half, larger) -> list[WhatIf]:
    names = NAMES[1:]
    return [WhatIf(name, "how", None if s is None else timed(s), "" if s else "not predicted")
            for name, s in zip(names, (graph, fusion, pinned, half, larger))]


def test_what_matters_names_the_fix_that_saves_the_most_and_why():
    # eager 1 ms: host 0.6 + launches 0.2 = 80% of it, the GPU idle 0.7 ms = 70%; the graph's 0.3 ms saves 70%
    eager = WhatIf(yourmodel.EAGER, "how", timed(1e-3, gpu_idle=7e-4, host=6e-4, launches=2e-4, compute=1e-4,
                                                 copies=1e-4))
    said = yourmodel.what_matters([eager, *fixes(3e-4, 5e-4, 9e-4, None, 4e-4)])
    assert said.startswith("CUDA graph matters most here, 70% less predicted time per sample than eager, because "
                           "the eager step is host-bound: the host's dispatch and launches are 80% of it, and the GPU "
                           "idles 70% of the time.")


def test_what_matters_says_no_fix_helps_when_none_saves_five_percent():
    # eager device-bound: compute 0.6 ms, copies 0.1, host 0.2 + launches 0.1 = 30%; the best fix 0.97 ms saves 3%
    eager = WhatIf(yourmodel.EAGER, "how", timed(1e-3, "device-bound", host=2e-4, launches=1e-4, compute=6e-4,
                                                 copies=1e-4))
    said = yourmodel.what_matters([eager, *fixes(0.99e-3, 0.97e-3, 1.2e-3, 1.1e-3, None)])
    assert said == ("No fix saves more than 5% of the predicted time: the eager step is device-bound: the GPU's work "
                    "(60% compute, 10% copies) outweighs the host's 30%.")
    assert yourmodel.what_matters([eager, *fixes(None, None, None, None, None)]) == "No fix is predicted for this GPU."


# -- a description timed on this machine ---------------------------------------------------------------------------

def test_the_check_s_path_is_the_description_s_digest_under_this_machine_s_folder(results_dir):
    query = {"family": "mlp", "mode": "inference", "batch": "10", "depth": "2", "width": "32", "in_features": "8",
             "out_features": "1"}
    digest = hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:16]
    machine = devices.fingerprint()["machine_id"]
    assert yourmodel.check_path(mlp(10)) == results_dir / machine / ".your_models" / f"{digest}.json"
    assert yourmodel.check_path(mlp(11)) != yourmodel.check_path(mlp(10))


def write_report(described, report) -> None:
    where = yourmodel.check_path(described)
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(json.dumps({"model": "your_model.py:build", "input": "10x8", "train": False, "report": report}))


TIMED_HERE = {"device": "this", "predicted_s": 1e-3, "measured_s": 2e-3, "measured_iqr_s": 1e-4,
              "measured_blocks": 5, "calls_per_block": 100, "threads": 2, "measured_noisy": False}


def test_measured_is_the_report_s_timed_entry_once_there_is_one():
    described = mlp(10)
    assert yourmodel.measured(described) is None
    write_report(described, [TIMED_HERE, {"device": "t4", "predicted_s": 5e-4}])
    assert yourmodel.measured(described) == TIMED_HERE
    write_report(described, [{"device": "t4", "predicted_s": 5e-4}, TIMED_HERE])  # wherever it stands
    assert yourmodel.measured(described) == TIMED_HERE
    assert yourmodel.measured(mlp(11)) is None  # another description's


def test_a_report_that_cannot_be_read_is_no_measurement():
    described = mlp(10)
    write_report(described, [{"device": "t4", "predicted_s": 5e-4}])  # nothing timed
    assert yourmodel.measured(described) is None
    yourmodel.check_path(described).write_text('{"report": [{"measured_s"')  # cut short
    assert yourmodel.measured(described) is None
    yourmodel.check_path(described).write_text("[1, 2]")  # not an object
    assert yourmodel.measured(described) is None


def test_a_report_that_is_not_a_list_is_no_measurement():
    described = mlp(10)
    write_report(described, None)
    assert yourmodel.measured(described) is None
