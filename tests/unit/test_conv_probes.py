"""The one-channel convolution probes: each size's FLOPs (counted on the meta device) and the rates grouped by
the rank of the input, which tells Conv1d from Conv2d."""
import pytest

from core import conv_probes, costmodel, hardware


@pytest.mark.parametrize("size, rank, flops", [
    ("8x1x16", 3, 2 * 8 * 32 * 16 * 5),          # N x out channels x length x kernel, a multiply and an add
    ("8x1x256", 3, 2 * 8 * 32 * 256 * 5),
    ("8x1x16x16", 4, 2 * 8 * 32 * 16 * 16 * 9),  # padded: the output is as large as the input
])
def test_a_probe_size_counts_its_layer_s_flops_by_hand(size, rank, flops):
    assert conv_probes.call_flops(size) == (rank, flops)


def test_rates_are_grouped_by_rank_in_increasing_flops():
    found = conv_probes.rates_by_rank({"8x1x256": 5e9, "8x1x16": 5e8, "8x1x16x16": 2e9})
    assert found == {3: ((40960.0, 5e8), (655360.0, 5e9)), 4: ((1179648.0, 2e9),)}


def test_every_catalogue_cpu_holds_the_figure_as_an_assumption():
    cpus = [d for d in hardware.catalogue().devices.values() if d.kind == "cpu"]
    assert cpus and all(d.figures[costmodel.ONE_CHANNEL].assumption for d in cpus)
    assert all(d.figures[costmodel.ONE_CHANNEL].value == {} for d in cpus)
