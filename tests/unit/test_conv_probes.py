"""The one-channel convolution probes: each size's FLOPs (counted on the meta device) and the rates grouped by
the rank of the input, which tells Conv1d from Conv2d."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from core.model import conv_probes, costmodel, hardware, profiles


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


def test_the_backward_share_runs_between_the_probe_sets_by_channels_and_in_log_flops_along_one():
    # the 1-D probes on 8 x C x 256: one channel 655,360 FLOPs (2 x 8 x 32 x 256 x 5), 16 channels 16 times that
    figure = {"8x1x256": 0.6, "8x16x256": 0.8, "8x16x16": 0.7}
    one, many = 655360, 16 * 655360
    assert conv_probes.backward_share(figure, [32, 1, 5], one) == (pytest.approx(0.6), pytest.approx(one))
    # 4 channels: half way in logs between the sets; the 16-channel set at 4 x its 16-long probe's FLOPs (a
    # sixteenth of the 256-long one's) is half way from 0.7 to 0.8 in log FLOPs
    share, smallest = conv_probes.backward_share(figure, [32, 4, 5], 4 * many / 16)
    assert share == pytest.approx(0.5 * 0.6 + 0.5 * 0.75)
    assert smallest == pytest.approx((one * many / 16) ** 0.5)  # the 16-long probe is the set's smallest
    assert conv_probes.backward_share(figure, [32, 64, 5], 100 * many)[0] == pytest.approx(0.8)  # the end's
    assert conv_probes.backward_share(figure, [32, 16, 3, 3], many) is None  # no 2-D probe


def test_every_catalogue_cpu_holds_no_backward_share_and_says_what_it_assumes():
    cpus = [d for d in hardware.catalogue().devices.values() if d.kind == "cpu"]
    for figure in (d.figures[costmodel.BACKWARD_SHARE] for d in cpus):
        assert figure.assumption and figure.value == {} and "conv_flops' rate" in figure.note
