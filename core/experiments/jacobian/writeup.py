"""How the write-up's Jacobian timing figures (seed 004: the wall time of one written call at val 100 and
1000, and of moving the network and the input to the GPU) are replicated by the cost model (core.predict.writeups).
The written call is 400·val backward passes of a handful of operations each (400,000 at val 1000): far too many to census, so
its prediction is taken at two small vals and extrapolated with the experiment's own time model."""
from core.experiments.jacobian.experiment import AS_WRITTEN, COMPLEXITY, MOVE, fit_time_model
from core.predict.writeups import Fit, Replica

CENSUSED_VALS = (10, 30)  # a few seconds of census each; the time model has two terms
MOVED_VAL = 100           # the input of the write-up's move (its val at the time)
CENSUS = {"budget_s": 36_000.0, "repeats": 1}  # a census makes one call whatever the budget: never skip it

CELL = ("The write-up's wall time is %%time around a whole notebook cell: importing torch, building the network, "
        "{moving} and one cold call.")
GPU_CELL = CELL.format(moving="moving it and the input to the GPU (the process's first CUDA call, which creates "
                              "its context)") + (" Its CPU time (user 18.6 s, sys 1.5 s for a 19.5 s wall at val 100) "
                                                 "shows the host busy throughout.")
CPU_CELL = CELL.format(moving="drawing the input")
MOVE_METHOD = ("%%time around `nx.to(device)` and `t.to(device)` in a cell of their own; if it ran after the GPU cell, "
               "as its place in the write-up suggests, both were already on the GPU and the calls copied nothing.")


def wall(figure: str, val: int, method: str) -> Replica:
    model = COMPLEXITY[AS_WRITTEN]
    return Replica(figure, AS_WRITTEN, {"val": val}, scale=1.0,
                   how=(f"one call at val {val:,}: predicted at val {CENSUSED_VALS[0]} and {CENSUSED_VALS[1]} (a census "
                        f"at val {val:,} would follow {400 * val:,} backward passes), fitted to the experiment's time "
                        f"model {model.formula} and evaluated at val {val:,} (on a CPU, whose small operations run at lower "
                        f"rates, an extrapolation errs high)"),
                   overrides={"vals": CENSUSED_VALS, "variants": (AS_WRITTEN,)} | CENSUS,
                   method=method, method_adds=True,
                   fit=Fit("val", CENSUSED_VALS, model.terms, fit_time_model, model.formula))


REPLICAS = (
    wall("jacobian-wall.cpu.val100", 100, CPU_CELL),
    wall("jacobian-wall.gpu.val100", 100, GPU_CELL),
    wall("jacobian-wall.cpu.val1000", 1000, CPU_CELL),
    wall("jacobian-wall.gpu.val1000", 1000, GPU_CELL),
    Replica("jacobian-move.gpu", MOVE, {"val": MOVED_VAL}, scale=1.0,
            how=f"one move of the weights and an input of val {MOVED_VAL} to the GPU: one predicted sample",
            overrides={"vals": (MOVED_VAL,), "variants": (MOVE,)} | CENSUS,
            method=MOVE_METHOD),
)
