import pandas as pd
import pytest

from core import published
from core.present import analysis
from core.present.analysis import (ESTIMATED, NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE, Claim, Finding, NoFinding,
                           evaluate)
from tests.helpers import hand_rows


def point(device, median, size=64, **run):
    return {"device": device, "variant": "v", "size": size, "median_s": median, **run}


def frame(*entries):
    return hand_rows(list(entries), ("size",))


def test_pairs_are_made_on_one_machine_with_one_configuration():
    rows = frame(point("cpu", 4.0), point("cuda:0", 1.0), point("cuda:1", 2.0),
                 point("cpu", 9.0, machine_id="m2", machine="m2"),                        # another machine
                 point("cuda:0", 3.0, config_id="c2"))                                     # another configuration
    found = analysis.speedups(rows).set_index(["machine_id", "config_id", "device"])["speedup"]
    assert found.to_dict() == {("m1", "c1", "cuda:0"): 4.0, ("m1", "c1", "cuda:1"): 2.0}


def test_mps_counts_as_an_accelerator():
    found = analysis.speedups(frame(point("cpu", 3.0), point("mps", 1.0)))
    assert found["device"].tolist() == ["mps"] and found["speedup"].tolist() == [3.0]


def test_the_latest_complete_run_wins_unless_a_run_is_chosen():
    rows = frame(point("cpu", 4.0), point("cuda:0", 1.0),
                 point("cpu", 8.0, run_id="r2", started="2026-02-01T00:00:00+00:00"),
                 point("cpu", 1.0, run_id="r3", started="2026-03-01T00:00:00+00:00", status="cancelled"))
    assert analysis.speedups(rows)["speedup"].tolist() == [8.0]          # r2: newer than r1, r3 not complete
    assert analysis.speedups(rows, run_id="r1")["speedup"].tolist() == [4.0]
    stacked = pd.concat([rows.iloc[[2]], rows.iloc[[0, 1]]])  # frames put together: their index labels repeat
    assert analysis.speedups(stacked.set_axis([0, 0, 1]))["speedup"].tolist() == [8.0]


def test_failed_and_skipped_points_are_never_compared():
    rows = frame(point("cpu", 4.0), point("cuda:0", 1.0, point_status="oom"))
    assert analysis.speedups(rows).empty


def test_a_variant_is_compared_with_its_baseline_on_the_same_device_or_the_machine():
    rows = hand_rows([{"device": "cpu", "variant": "base", "size": 8, "median_s": 6.0},
                      {"device": "cpu", "variant": "fast", "size": 8, "median_s": 2.0},
                      {"device": "cuda:0", "variant": "gpu", "size": 8, "median_s": 3.0}], ("size",))
    same = analysis.relative_to(rows, "base")
    assert same.set_index("variant")["gain"].to_dict() == {"fast": 3.0}
    anywhere = analysis.relative_to(rows, "base", same_device=False)
    assert anywhere.set_index("variant")["gain"].to_dict() == {"fast": 3.0, "gpu": 2.0}


@pytest.mark.parametrize("speedups, expected", [
    ({16: 0.5, 64: 2.0, 256: 3.0}, 64),          # wins from the middle on
    ({16: 2.0, 64: 3.0}, 16),                     # wins everywhere: the smallest size
    ({16: 0.5, 64: 2.0, 256: 0.9}, None),         # loses at the largest: no crossover
    ({16: 1.0, 64: 1.0}, None),                   # a tie is not a win
    ({16: 0.2, 64: 3.0, 256: 0.5, 1024: 4.0}, 1024),
])
def test_crossover_is_the_smallest_size_from_which_every_larger_one_wins(speedups, expected):
    found = analysis.crossovers(pd.DataFrame({"g": "a", "size": list(speedups), "speedup": list(speedups.values())}),
                                "size", ["g"])
    got = found["crossover"].iloc[0]
    assert pd.isna(got) if expected is None else got == expected
    assert found["compared"].iloc[0] == len(speedups)


def test_crossover_of_a_single_size_and_of_repeated_figures():
    single = analysis.crossovers(pd.DataFrame({"g": ["a"], "size": [8], "speedup": [0.5]}), "size", ["g"])
    assert single["crossover"].isna().all() and single["compared"].tolist() == [1]
    repeated = pd.DataFrame({"g": "a", "size": [8, 8, 8, 16], "speedup": [0.5, 3.0, 2.0, 2.0]})
    assert analysis.crossovers(repeated, "size", ["g"])["crossover"].tolist() == [8]  # median 2.0 at size 8


FIGURE = "iris-total.gpu"


def faster_on_gpu(rows, figures):
    found = analysis.require(analysis.speedups(rows), rows)
    return Finding(found["speedup"].median() > 1, f"measured {found['speedup'].median():.1f}x")


def test_claim_outcomes_from_the_rows():
    claim = Claim("the GPU is faster", faster_on_gpu, "Reproduced means above 1.", (FIGURE,))
    figures = published.load("iris")
    assert evaluate(claim, frame(), figures).outcome == NO_DATA
    assert evaluate(claim, frame(point("cpu", 1.0)), figures).outcome == NEEDS_GPU
    unpaired = evaluate(claim, frame(point("cpu", 1.0), point("cuda:0", 1.0, machine_id="m2")), figures)
    assert unpaired.outcome == NO_DATA and "same configuration" in unpaired.evidence
    won = evaluate(claim, frame(point("cpu", 4.0), point("cuda:0", 1.0)), figures)
    assert won.outcome == REPRODUCED and won.basis == "measured"
    assert "measured 4.0x" in won.evidence and "Reproduced means above 1." in won.evidence
    lost = evaluate(claim, frame(point("cpu", 1.0), point("cuda:0", 4.0)), figures)
    assert lost.outcome == NOT_REPRODUCED


def test_a_verdict_resting_on_an_estimate_says_so():
    claim = Claim("extrapolated", lambda rows, figures: Finding(True, "fitted to two sizes", estimated=True))
    verdict = evaluate(claim, frame(point("cpu", 1.0)), published.load("iris"))
    assert verdict.outcome == ESTIMATED and verdict.basis == "estimated"
    assert "if it holds, the claim is reproduced" in verdict.evidence and "fitted to two sizes" in verdict.evidence


def test_a_check_can_say_why_it_found_nothing():
    def nothing(rows, figures):
        raise NoFinding(NO_DATA, "no size from 100 to 200 measured")
    verdict = evaluate(Claim("small sizes", nothing), frame(point("cpu", 1.0)), published.load("iris"))
    assert verdict.outcome == NO_DATA and verdict.evidence == "no size from 100 to 200 measured"


def test_the_published_figure_is_quoted_from_published_json():
    entry = published.entry(FIGURE)
    claim = Claim("the GPU is faster", faster_on_gpu, figures=(FIGURE,))
    verdict = evaluate(claim, frame(point("cpu", 4.0), point("cuda:0", 1.0)), published.load("iris"))
    assert f"GPU {entry['value']:g} s" in verdict.evidence and entry["hardware"] in verdict.evidence
    group = analysis.referenced(Claim("x", faster_on_gpu, figures=("iris-total",)), published.load("iris"))
    assert set(group["device"]) == {"CPU", "GPU"}
    with pytest.raises(KeyError, match="unknown published figure"):
        evaluate(Claim("x", faster_on_gpu, figures=("no-such-figure",)), frame(), published.load("iris"))


def test_every_published_figure_has_a_unique_id_and_renders_in_prose():
    figures = published.load()
    assert figures["id"].is_unique
    ratio, seconds = published.entry("matmul-200-speedup.gpu.size200.torch-resident"), published.entry("iris-total.cpu")
    assert published.figure_text(ratio["id"]) == f"{ratio['value']:g}x"
    assert published.figure_text(seconds["id"]) == f"{seconds['value']:g} s"


def test_a_verdict_that_needs_a_gpu_gives_the_predicted_answer_said_as_such():
    def gpu_faster(rows, figures):
        found = analysis.require(analysis.speedups(rows), rows)
        return Finding(bool((found["speedup"] > 1).all()), f"speedup {found['speedup'].median():.1f}x")
    claim = Claim("the GPU is faster", gpu_faster)
    measured = frame(point("cpu", 4.0))
    predicted = frame(point("meta", 1.0)).assign(hardware="T4 driven by this machine's CPU", provenance="predicted")
    verdict = evaluate(claim, measured, pd.DataFrame(), predicted, "median ratio 1.10")
    assert verdict.outcome == NEEDS_GPU and verdict.basis == ""
    assert verdict.prediction == ("Predicted on T4 driven by this machine's CPU (a model, not a measurement): the "
                                  "claim would be reproduced. speedup 4.0x The model on this machine: median ratio 1.10.")
    assert evaluate(claim, measured, pd.DataFrame()).prediction == ""


@pytest.mark.parametrize("fast, slow, leaning, said", [
    # predicted 1 s against the CPU's 4 s, likely 0.5-2 s: faster at either end
    (0.5, 2.0, REPRODUCED, "the claim would be reproduced, across the predicted times' likely range."),
    # likely 0.5-8 s: faster at the fast end, slower at the slow end
    (0.5, 8.0, TOO_CLOSE, "too close to call by the model's error. At the fast end of the predicted times' likely "
                          "range the claim would be reproduced, at the slow end it would not."),
])
def test_a_predicted_answer_holds_only_where_it_holds_across_the_model_s_error(fast, slow, leaning, said):
    def gpu_faster(rows, figures):
        found = analysis.require(analysis.speedups(rows), rows)
        return Finding(bool((found["speedup"] > 1).all()), f"speedup {found['speedup'].median():.1f}x")
    predicted = frame(point("meta", 1.0)).assign(hardware="T4", provenance="predicted", fast_edge=fast, slow_edge=slow)
    verdict = evaluate(Claim("the GPU is faster", gpu_faster), frame(point("cpu", 4.0)), pd.DataFrame(), predicted)
    assert verdict.outcome == NEEDS_GPU and verdict.leaning == leaning
    assert verdict.prediction.startswith(f"Predicted on T4 (a model, not a measurement): {said}")


def test_a_predicted_answer_from_gpus_driven_by_each_runs_own_cpu_says_so_once():
    def gpu_faster(rows, figures):
        found = analysis.require(analysis.speedups(rows), rows)
        return Finding(bool((found["speedup"] > 1).all()), f"speedup {found['speedup'].median():.1f}x")
    measured = frame(point("cpu", 4.0), point("cpu", 2.0, machine_id="m2", machine="m2", run_id="r2"))
    predicted = frame(point("meta", 1.0), point("meta", 1.0, machine_id="m2", machine="m2", run_id="r2")).assign(
        hardware=["T4 driven by this machine's CPU", "T4 driven by Xeon (m2)"], device_name="T4 (predicted)",
        provenance="predicted")
    verdict = evaluate(Claim("the GPU is faster", gpu_faster), measured, pd.DataFrame(), predicted)
    assert verdict.prediction.startswith(
        "Predicted on T4, each run's driven by its own machine's CPU where that machine is calibrated, else by this "
        "machine's (a model, not a measurement): the claim would be reproduced. speedup 3.0x")


def test_a_gpu_measured_without_its_machines_cpu_leaves_no_pair_and_the_predicted_answer_beside():
    def gpu_faster(rows, figures):
        found = analysis.require(analysis.speedups(rows), rows)
        return Finding(bool((found["speedup"] > 1).all()), f"speedup {found['speedup'].median():.1f}x")
    measured = frame(point("cpu", 4.0), point("cuda:0", 1.0, machine_id="m2", machine="m2"))  # the GPU ran elsewhere
    predicted = frame(point("meta", 8.0)).assign(hardware="T4", provenance="predicted")
    verdict = evaluate(Claim("the GPU is faster", gpu_faster), measured, pd.DataFrame(), predicted)
    assert verdict.outcome == NO_DATA and "on both its CPU and a GPU" in verdict.finding
    assert verdict.prediction.startswith("Predicted on T4 (a model, not a measurement): the claim would not be")
    assert verdict.leaning == NOT_REPRODUCED


def test_a_prediction_never_answers_what_a_gpu_measured_or_a_check_it_cannot_feed():
    def needs_a_loss(rows, figures):
        analysis.require(analysis.pair(rows, ("final_loss",)), rows)
        return Finding(True, "losses agree")
    measured = frame(point("cpu", 4.0, final_loss=0.1))
    predicted = frame(point("meta", 1.0)).assign(hardware="T4", provenance="predicted")
    losses = Claim("losses agree", needs_a_loss, predictable=False)
    assert evaluate(losses, measured, pd.DataFrame(), predicted).prediction == ""
    on_gpu = frame(point("cpu", 4.0, final_loss=0.1), point("cuda:0", 1.0, final_loss=0.1))
    verdict = evaluate(Claim("losses agree", needs_a_loss, predictable=True), on_gpu, pd.DataFrame(), predicted)
    assert verdict.outcome == REPRODUCED and verdict.prediction == ""
