import pytest
import torch

from core import devices
from core.measure import graphs

CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]
needs_cuda = pytest.mark.skipif(not CUDA_DEVICES, reason="CUDA graphs need a CUDA device; none is present here")


def sgd_step(device):
    """A tiny training step whose tensors stay in place, as a graph needs."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).to(device)
    x, y = torch.randn(8, 4, device=device), torch.randn(8, 1, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        optimizer.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return model, step


def test_on_the_cpu_the_eager_step_is_used_without_an_error():
    model, step = sgd_step("cpu")
    chosen, error = graphs.replay_or_eager(step, "cpu", model.parameters())
    assert chosen is step and error is None
    with pytest.raises(graphs.GraphCaptureError, match="need a CUDA device, not cpu"):
        graphs.capture(step, "cpu", model.parameters())


def test_a_failed_capture_falls_back_to_the_eager_step_with_the_error(monkeypatch):
    def broken(step, device, watched):
        raise graphs.GraphCaptureError("capture on cuda:1 failed: operation not permitted when stream is capturing")
    monkeypatch.setattr(graphs, "capture", broken)
    monkeypatch.setattr(graphs.devices, "kind", lambda device: "cuda")
    model, step = sgd_step("cpu")
    chosen, error = graphs.replay_or_eager(step, "cuda:1", model.parameters())
    assert chosen is step and "operation not permitted" in error
    assert graphs.replay_or_eager(step, "cuda:1", model.parameters(), enabled=False) == (step, None)


def test_a_replay_that_changes_nothing_is_refused():
    weights = torch.ones(3)
    with pytest.raises(graphs.GraphCaptureError, match="changed nothing"):
        graphs._check_replay(lambda: None, [weights], "cpu")
    graphs._check_replay(lambda: weights.add_(1), [weights], "cpu")  # a replay that trains passes


@needs_cuda
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_a_captured_step_trains_on_every_gpu(device):
    model, step = sgd_step(device)
    replay = graphs.capture(step, device, model.parameters())
    before = [p.detach().clone() for p in model.parameters()]
    replay()
    devices.synchronize(device)
    assert any((p != b).any() for p, b in zip(model.parameters(), before))
    assert all(p.device == torch.device(device) for p in model.parameters())


@needs_cuda
def test_a_failed_capture_leaves_the_current_stream_as_it_was():
    device = CUDA_DEVICES[-1]
    before = torch.cuda.current_stream(device)

    def illegal():
        torch.cuda.synchronize()  # not allowed while capturing
    with pytest.raises(graphs.GraphCaptureError):
        graphs.capture(illegal, device, [torch.zeros(1, device=device)], warmup_steps=0)
    assert torch.cuda.current_stream(device) == before


def test_a_starting_point_puts_weights_and_a_fresh_optimiser_state_back_in_place():
    model, step = sgd_step("cpu")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    start = graphs.StartingPoint(model.parameters(), optimizer)
    first, before = model.weight, model.weight.detach().clone()
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
    start.restore()
    assert model.weight is first and torch.equal(model.weight, before)  # the same tensor, its old values
    assert all(not v.any() for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


def test_a_graph_on_the_stand_in_is_the_eager_step_in_the_replay_range():
    calls = []
    replay, error = graphs.replay_or_eager(lambda: calls.append(1), "meta", [])
    assert error is None
    with torch.autograd.profiler.profile() as profile:
        replay()
    assert calls == [1] and graphs.REPLAY_RANGE in {e.name for e in profile.function_events}
    step = calls.clear
    assert graphs.replay_or_eager(step, "meta", [], enabled=False) == (step, None)


@needs_cuda
@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_a_census_counts_a_captured_graphs_step_as_one_replay_of_its_operations(device):
    from core.measure import census
    model, step = sgd_step(device)
    replay = graphs.capture(step, device, model.parameters())
    found = census.of(replay, device).summary()
    assert found["graph_replays"] == 1
    assert {o["phase"] for o in found["ops"]} == {"graph"}
    assert any(o["op"] == "aten.addmm" and o["where"] == "cuda" for o in found["ops"])
