from core.charts.matmul import charts
from core.experiments.matmul import crossovers, verdicts
from ui.template import experiment_page

EXPLANATION = """
A product of two n x n matrices does 2n³ floating-point operations on 3n² numbers. At n = 200 that is
16 MFLOP: a GPU does it in a few microseconds, but every call also pays a fixed price (a kernel launch,
a Python dispatch, and, when the data lives on the host, three copies over PCIe). Copying 3 x 160 kB
at a few GB/s costs about as much as the whole product on a good CPU, which is why the write-up saw
the copied GPU variant land next to numpy: the work was too small to amortise the trip.

The crossover chart shows where that changes on your hardware: the copy cost grows like n², the
arithmetic like n³, so past some size the GPU wins even with the copies. Pinned (page-locked) host
memory lets the copies run by DMA without a staging buffer and usually raises the bandwidth; keeping
the operands resident (the expert's fix) removes the copies altogether.
"""


def tables(rows):
    return {"Crossover: the smallest size from which each GPU variant beats numpy at every larger size": crossovers(rows)}


experiment_page("matmul", charts, EXPLANATION, verdicts=verdicts, tables=tables)
