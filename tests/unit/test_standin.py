import pytest
import torch

from core.measure import census, standin, timing
from core.experiments import get
from core.measure.experiment import Experiment, Point, RunState, SkipPoint, Variant


def test_the_stand_in_plans_a_gpus_variants():
    matmul = get("matmul")
    config = matmul.config("smoke", {"sizes": (16,)})
    assert [p.variant for p in standin.points(matmul, config)] == [
        "torch resident", "torch copy pageable", "torch copy pinned", "h2d pageable", "h2d pinned", "d2h pageable",
        "d2h pinned"]
    assert {p.device for p in standin.points(matmul, config)} == {"meta"}


def test_optimisers_take_their_cuda_paths_on_the_stand_in_and_their_own_elsewhere():
    def adam_step(device: str, **options) -> dict:
        model = torch.nn.Linear(4, 3).to(device)
        optimiser = torch.optim.Adam(model.parameters(), **options)
        model(torch.ones(2, 4, device=device)).sum().backward()
        optimiser.step()
        return census.of(optimiser.step, device).by_op()
    with standin.playing_cuda():
        assert "aten._foreach_add_" in adam_step("meta")  # foreach by default, as on CUDA
        assert "aten._fused_adam_" in adam_step("meta", fused=True, capturable=True)
        assert "aten._foreach_add_" not in adam_step("cpu")  # the CPU keeps its per-tensor loop
    with pytest.raises(RuntimeError, match="fused=True"):
        adam_step("meta", fused=True)  # outside, torch refuses fused meta tensors as it always did


def test_a_pinned_copy_exists_only_on_the_stand_in_and_counts_as_pinned_without_a_sync():
    matmul = get("matmul")
    config = matmul.config("smoke", {"sizes": (16,)})
    pinned = standin.take(matmul, Point("meta", "h2d pinned", {"size": 16}), config)
    pageable = standin.take(matmul, Point("meta", "h2d pageable", {"size": 16}), config)
    assert (pinned["h2d_copies"], pinned["h2d_bytes"], pinned["pinned_h2d_bytes"], pinned["syncs"]) == (1, 1024, 1024, 0)
    assert (pageable["h2d_copies"], pageable["pinned_h2d_bytes"], pageable["syncs"]) == (1, 0, 1)
    assert pinned["ops"][0]["copy"] == {"direction": "h2d", "pinned": True, "bytes": 1024}


def test_the_cnns_stand_in_epochs_count_what_a_gpu_would_do(one_thread):
    cnn = get("cnn")
    config = cnn.config("smoke")
    params = {"model": "cnn1d", "batch_size": 64, "rows": 128}  # two steps an epoch
    written = standin.entry(cnn, Point("meta", "as written", params), config)
    assert (written["unit"], written["per_call"]) == ("epoch", 1)
    found = written["census"]
    # per step: the batch and its targets copied in (each a blocking copy from pageable memory), loss.item()
    assert (found["h2d_copies"], found["syncs"], found["d2h_copies"], found["graph_replays"]) == (4, 6, 0, 0)
    assert found["loader"] == {"batches": 2, "samples": 128}
    tuned = standin.take(cnn, Point("meta", "tuned", params), config)
    # data resident, the step replayed as a graph, fused Adam, the loss read only after the epoch
    assert (tuned["graph_replays"], tuned["syncs"], tuned["copies"]) == (2, 0, 0)
    assert "aten._fused_adam_" in {o["op"] for o in tuned["ops"] if o["phase"] == "graph"}


@pytest.mark.full
def test_every_stand_in_point_of_the_smoke_matmul_gives_a_census():
    matmul = get("matmul")
    config = matmul.config("smoke", {"sizes": (16, 64)})
    entries = [standin.entry(matmul, p, config) for p in standin.points(matmul, config)]
    assert len(entries) == 14 and all("operations" in e["census"] for e in entries)
    resident = next(e for e in entries if e["variant"] == "torch resident" and e["params"] == {"size": 64})
    assert (resident["unit"], resident["census"]["kernels"], resident["census"]["flops"]) == ("product", 1, 2 * 64**3)


class Failing(Experiment):
    """One point skipped while it is built, one whose call fails, one that works."""
    name = "failing"
    variants = (Variant("skipped", "skips"), Variant("broken", "fails"), Variant("works", "adds"))

    def points(self, config: dict, device: str) -> list[Point]:
        return [Point(device, v.name) for v in self.variants_for(config, device)]

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        if point.variant == "skipped":
            raise SkipPoint("needs something the stand-in lacks")
        x = torch.ones(3, device=point.device)

        def call():
            if point.variant == "broken":
                raise RuntimeError("the call fails")
            return x + 1
        return timing.Workload(call, unit="sum", per_call=2)


def test_a_skipped_or_failing_point_is_recorded_as_such():
    experiment = Failing()
    config = experiment.config("smoke")
    found = {p.variant: standin.entry(experiment, p, config) for p in standin.points(experiment, config)}
    assert found["skipped"] == {"variant": "skipped", "params": {}, "unit": None, "per_call": 1,
                                "census": {"skipped": "needs something the stand-in lacks"}}
    assert found["broken"]["census"] == {"error": "RuntimeError: the call fails"}
    assert (found["broken"]["unit"], found["broken"]["per_call"]) == ("sum", 2)
    assert found["works"]["census"]["kernels"] == 1 and found["works"]["census"]["device"] == "meta"
    assert standin.take(experiment, Point("cpu", "works"), config)["device"] == "cpu"  # any device's point
