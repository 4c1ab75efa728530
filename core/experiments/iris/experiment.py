"""Experiment 4: the write-up's 4 -> 10 -> 3 MLP on Iris, full-batch SGD, on each device: total and
per-epoch time, the cost of reading the loss to the host every k epochs, a variant that reads it once
(and on CUDA replays the step as a graph), the cost of one read timed as a paired difference (blocks of
epochs reading the loss every epoch alternated with blocks never reading it, in one process), and the
model(x) vs model.forward(x) hook check."""
from core import devices, published
from core.measure import timing
from core.measure.experiment import Point, RunState, Variant
from core.present.presented import Presented
from core.experiments.iris.model import Training, initial_model, iris_data, thinned
from core.params import ConfigError, Param

AS_WRITTEN, TUNED, HOOK_CHECK, READ_COST = "as written", "tuned", "hook check", "read cost"
NEVER = 0                       # log_every value meaning "never read the loss"
PAPER_EPOCHS = published.entry("iris-total.cpu")["params"]["epochs"]  # the write-up's run length; times are also shown scaled to it
CALLS = ("model(x)", "model.forward(x)")
CHECK_CALLS = 10                # calls made to count how often the hook runs
GUESS_S_PER_EPOCH = {"cpu": 300e-6, "cuda": 300e-6, "mps": 500e-6}
EVERY_LAP, NEVER_LAP = "read every epoch", "never read"   # the read-cost measurement's laps, one per block


class Iris(Presented):
    name = "iris"
    title = "Iris MLP: tiny-model overhead and the cost of reading the loss"
    order = 40
    metric_units = {"seconds_per_20k_epochs": "s", "us_per_call": "µs", "us_per_epoch": "µs"}
    source = "003_f091c9a0e5f7d524.txt"
    params = (
        Param("epochs", int, PAPER_EPOCHS, "full-batch training epochs per run", low=1, high=1_000_000),
        Param("log_every", int, (1, 10, 100, 200, 1000, 2000, NEVER),
              "read the loss every k epochs (as written); 0 means never", low=0, high=1_000_000, many=True),
        Param("lr", float, 0.01, "SGD learning rate", low=1e-6, high=10.0),
        Param("repeats", int, 3, "timed runs per point (after one untimed warm-up run)", low=1, high=50),
        Param("block_seconds", float, 0.05, "length of one timed block of calls (hook check)", low=0.001, high=5.0),
        Param("seed", int, 0, "seed of the initial weights", low=0, high=2**31 - 1),
        Param("read_pairs", int, 30, "read cost: pairs of blocks (one reading the loss every epoch, one never "
                                     "reading it) alternated in one process", low=2, high=1000),
        Param("read_block_epochs", int, 200, "read cost: epochs per block (so reads per reading block)",
              low=1, high=100_000),
    )
    presets = {
        "smoke": {"epochs": 200, "log_every": (1, 10, 100, NEVER), "repeats": 2, "block_seconds": 0.002,
                  "read_pairs": 4, "read_block_epochs": 20},
        "quick": {"epochs": 2000, "log_every": (1, 10, 100, 200, 1000, 2000, NEVER), "repeats": 3,
                  "block_seconds": 0.02, "read_pairs": 16, "read_block_epochs": 100},
        "paper": {"epochs": PAPER_EPOCHS, "log_every": (1, 10, 100, 200, 1000, 2000, NEVER), "repeats": 3,
                  "block_seconds": 0.05, "read_pairs": 30, "read_block_epochs": 200},
    }
    variants = (
        Variant(AS_WRITTEN, "the write-up's loop: loss.item() every k epochs (k from log_every)"),
        Variant(TUNED, "every loss into a preallocated device tensor, read once at the end; "
                       "on CUDA the step is replayed as a CUDA graph"),
        Variant(HOOK_CHECK, "model(x) vs model.forward(x), with and without a forward hook"),
        Variant(READ_COST, "blocks of epochs reading the loss every epoch alternated with blocks never reading "
                           "it, in one process: their paired difference is the cost of one loss.item()"),
    )

    def validate(self, config: dict) -> None:
        intervals = config["log_every"]
        if len(set(intervals)) != len(intervals):
            raise ConfigError("log_every", f"{intervals} lists an interval twice")
        too_long = [k for k in intervals if k > config["epochs"]]
        if too_long:
            raise ConfigError("log_every", f"{too_long[0]} is more than epochs ({config['epochs']}), so the "
                                           "loss would never be read; use 0 for never, or at most epochs")

    def points(self, config: dict, device: str) -> list[Point]:
        chosen = [v.name for v in self.variants_for(config, device)]
        out = []
        if AS_WRITTEN in chosen:
            out += [Point(device, AS_WRITTEN, {"log_every": k}) for k in config["log_every"]]
        if TUNED in chosen:
            out.append(Point(device, TUNED, {"log_every": 1}))  # it receives every epoch's loss
        if HOOK_CHECK in chosen:
            out += [Point(device, HOOK_CHECK, {"call": call, "hook": hook}) for call in CALLS for hook in (False, True)]
        if READ_COST in chosen:
            out.append(Point(device, READ_COST, {"block_epochs": config["read_block_epochs"]}))
        return out

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        if point.variant == HOOK_CHECK:
            return hook_check(point, config)
        if point.variant == READ_COST:
            return read_cost(point, config)
        return training_run(point, config)

    def estimate_seconds(self, config: dict, device: str) -> float:
        per_run = config["epochs"] * GUESS_S_PER_EPOCH.get(devices.kind(device), 300e-6)
        points = self.points(config, device)
        runs = sum(p.variant in (AS_WRITTEN, TUNED) for p in points) * (config["repeats"] + 1)
        calls = sum(p.variant == HOOK_CHECK for p in points) * (config["repeats"] + 2) * config["block_seconds"]
        blocks = sum(p.variant == READ_COST for p in points) * 2 * (config["read_pairs"] + 1)  # and one warm-up pair
        per_block = config["read_block_epochs"] * GUESS_S_PER_EPOCH.get(devices.kind(device), 300e-6)
        return runs * per_run + calls + blocks * per_block + 1.0


def training_run(point: Point, config: dict) -> timing.Workload:
    """One call is one training run of `epochs` epochs from the seeded weights; the first is the warm-up."""
    epochs = config["epochs"]
    training = Training(point.device, config["seed"], config["lr"], epochs)
    if point.variant == AS_WRITTEN:
        k = point.params["log_every"]
        loop, graph = (lambda: training.as_written(k)), {"cuda_graph": False}
    else:
        error = training.use_graph()
        loop = training.buffered
        graph = {"cuda_graph": training.graphed} | ({"cuda_graph_error": error} if error else {})

    def finish(m: timing.Measurement) -> dict:
        final_loss, final_accuracy = training.evaluate()
        curve = thinned(training.logged)
        per_epoch = m.median / epochs
        return {"host_syncs": training.reads, "losses_received": len(training.logged),
                "us_per_epoch": per_epoch * 1e6, "seconds_per_20k_epochs": per_epoch * PAPER_EPOCHS,
                "final_loss": final_loss, "final_accuracy": final_accuracy,
                "loss_curve_epochs": [e for e, _ in curve], "loss_curve": [v for _, v in curve]}
    settings = {"epochs": epochs, "lr": config["lr"], "seed": config["seed"]}
    return timing.Workload(loop, unit="epoch", per_call=epochs, repeats=config["repeats"], warmup=1,
                           finish=finish, metrics=settings | graph)


def hook_check(point: Point, config: dict) -> timing.Workload:
    """Count how often a registered forward hook runs over CHECK_CALLS calls, then time one call."""
    model = initial_model(config["seed"]).to(point.device).requires_grad_(False)  # no autograd graph
    x = iris_data()[0].to(point.device)
    hook_runs = 0

    def count(module, args, output):
        nonlocal hook_runs
        hook_runs += 1

    if point.params["hook"]:
        model.register_forward_hook(count)
    call = model if point.params["call"] == "model(x)" else model.forward
    for _ in range(CHECK_CALLS):
        call(x)
    counted = hook_runs

    def finish(m: timing.Measurement) -> dict:
        return {"us_per_call": m.median * 1e6}
    return timing.Workload(lambda: call(x), unit="forward call", repeats=config["repeats"],
                           block_seconds=config["block_seconds"], finish=finish,
                           metrics={"hook_calls": counted, "check_calls": CHECK_CALLS})


class AlternatedBlocks:
    """The read-cost measurement, one hooked call (core.measure.timing.Workload with `hooks`): `read_pairs` pairs
    of blocks of `read_block_epochs` epochs on one model and data set, one block reading the loss with
    `loss.item()` every epoch (the as-written loop at k = 1) and one never reading it (k = 0), each from the seeded
    weights. Each block is a lap of the device-synchronised stopwatch (both end with the device's queue empty), each
    pair one sample. The order alternates by pair (every-never, then never-every, ...) so that a drift of the
    machine's speed, or a block's advantage from running first, falls on both sides alike. `warm_up` (the
    workload's setup) runs one pair untimed."""

    def __init__(self, device: str, config: dict):
        self.block_epochs, self.pairs = config["read_block_epochs"], config["read_pairs"]
        self.training = Training(device, config["seed"], config["lr"], self.block_epochs)
        self.every_s: list[float] = []
        self.never_s: list[float] = []
        self.reads_per_block = 0

    def warm_up(self) -> None:
        self.training.as_written(1)
        self.training.as_written(NEVER)

    def __call__(self, watch: timing.Stopwatch) -> None:
        every, never = [], []
        watch.start()
        for i in range(self.pairs):
            for k in ((1, NEVER) if i % 2 == 0 else (NEVER, 1)):
                self.training.as_written(k)
                if k:
                    self.reads_per_block = self.training.reads
                    every.append(watch.lap(EVERY_LAP))
                else:
                    never.append(watch.lap(NEVER_LAP))
            watch.close_sample(EVERY_LAP, NEVER_LAP)
        self.every_s, self.never_s = every, never

    def metrics(self, m: timing.Measurement) -> dict:
        """The paired block times of the timed call (core.experiments.iris.analysis.read_cost turns them into the
        cost of one read with its interval)."""
        return {"read_block_s": list(self.every_s), "never_block_s": list(self.never_s),
                "reads_per_block": self.reads_per_block, "read_pairs": self.pairs}


def read_cost(point: Point, config: dict) -> timing.Workload:
    """A sample is one pair of blocks (2 x read_block_epochs epochs, half of them reading the loss every epoch);
    the blocks' own times are the metrics `read_block_s` and `never_block_s`, in pair order."""
    blocks = AlternatedBlocks(point.device, config)
    return timing.Workload(blocks, unit="epoch", per_call=2 * blocks.block_epochs, hooks=True, setup=blocks.warm_up,
                           finish=blocks.metrics, metrics={"lr": config["lr"], "seed": config["seed"]})


EXPERIMENT = Iris()
