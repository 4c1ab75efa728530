"""The one-channel convolution probes: each size's FLOPs (counted on the meta device) and the rates grouped by
the rank of the input, which tells Conv1d from Conv2d."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from core import conv_probes, costmodel, hardware, profiles


@pytest.mark.parametrize("size, rank, flops", [
    ("8x1x16", 3, 2 * 8 * 32 * 16 * 5),          # N x out channels x length x kernel, a multiply and an add
    ("8x1x256", 3, 2 * 8 * 32 * 256 * 5),
    ("8x1x16x16", 4, 2 * 8 * 32 * 16 * 16 * 9),  # padded: the output is as large as the input
])
def test_a_probe_size_counts_its_layer_s_flops_by_hand(size, rank, flops):
    assert conv_probes.call_flops(size) == (rank, flops)


@pytest.mark.parametrize("probe, shape", [
    (conv_probes.ONE_CHANNEL[3], (1, 1, 4)), (conv_probes.ONE_CHANNEL[4], (8, 1, 2, 2)),
    (profiles.CONV_PROBES["conv1d_flops"], (8, 16, 2048)), (profiles.CONV_PROBES["conv2d_flops"], (1, 16, 2, 2)),
])
def test_the_formula_counts_what_flop_counter_counts_running_the_layer(probe, shape):
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        conv_probes.layer(probe, "meta")(torch.empty(shape, device="meta"))
    assert conv_probes.forward_flops(probe, shape) == counter.get_total_flops() > 0


def test_rates_are_grouped_by_rank_in_increasing_flops():
    found = conv_probes.rates_by_rank({"8x1x256": 5e9, "8x1x16": 5e8, "8x1x16x16": 2e9})
    assert found == {3: ((40960.0, 5e8), (655360.0, 5e9)), 4: ((1179648.0, 2e9),)}


def test_every_catalogue_cpu_holds_the_figure_as_an_assumption():
    cpus = [d for d in hardware.catalogue().devices.values() if d.kind == "cpu"]
    assert cpus and all(d.figures[costmodel.ONE_CHANNEL].assumption for d in cpus)
    assert all(d.figures[costmodel.ONE_CHANNEL].value == {} for d in cpus)
