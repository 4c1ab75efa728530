"""Bad inputs to `python -m core run`, as data. Each case is {"argv": [...], "field": FIELD}: the run
must be refused with exit status 2, no traceback, a message naming FIELD and no more than
MAX_MESSAGE_CHARS long, before any workload is built (the runner is never reached, and refusing
allocates at most MAX_REFUSAL_BYTES) and with no record written. CASES are written by hand; NON_FINITE puts nan, inf, -inf and 1e309
(and their JSON spellings) into every number parameter of every experiment."""
import json

from core import experiments
from core.params import MAX_VALUES, clip

MAX_MESSAGE_CHARS = 400            # the longest refusal, a usage line or a list of choices included
MAX_REFUSAL_BYTES = 8 * 2**20      # peak Python allocations (tracemalloc) while refusing one case in-process
MAX_REFUSAL_RSS_GROWTH = 32 * 2**20  # a real process refusing a big input, over one refusing a small one
HUGE = "9" * 100_000               # a 100k-character value: never echoed back whole
TOO_MANY = ",".join(str(n) for n in range(1, 20_001))


def case(field: str, *argv: str) -> dict:
    return {"argv": ["run", *argv], "field": field}


def as_json(field: str, experiment: str, config: str) -> dict:
    return case(field, experiment, "--config-json", config)


GENERIC = [
    case("experiment", "nope"),
    case("experiment", "x" + HUGE),
    case("experiment"),                                       # argparse: the experiment is required
    case("preset", "matmul", "--preset", "huge"),
    case("preset", "matmul", "--preset", ""),
    case("preset", "matmul", "--preset", HUGE),
    case("--preset", "matmul", "--preset"),                   # argparse: the option needs a value
    case("device", "matmul", "--device", "cuda:9"),
    case("device", "matmul", "--device", "gpu"),
    case("device", "matmul", "--device", "cpu", "--device", HUGE),
    case("variants", "matmul", "--set", "variants=bogus"),
    case("variants", "matmul", "--set", "variants="),
    case("variants", "matmul", "--device", "cpu", "--set", "variants=torch resident"),
    case("bogus", "matmul", "--set", "bogus=1"),
    case(clip("y" + HUGE), "matmul", "--set", "y" + HUGE + "=1"),
    case("--set", "matmul", "--set", "repeats"),
    case("--set", "matmul", "--set", "=5"),
    case("--set", "matmul", "--set", HUGE),
    case("repeats", "matmul", "--set", "repeats="),
    case("repeats", "matmul", "--set", "repeats=2", "--set", "repeats=3"),
    case("repeats", "matmul", "--set", " repeats=2", "--set", "repeats =3"),
    as_json("--config-json", "matmul", "{not json"),
    as_json("--config-json", "matmul", "[8, 16]"),
    as_json("--config-json", "matmul", '{"sizes": [8], "sizes": [16]}'),
    as_json("--config-json", "matmul", "[" * 100_000),
    as_json("--config-json", "matmul", "1" * 5000),
    as_json("nonsense", "matmul", '{"nonsense": 1}'),
    case("repeats", "matmul", "--config-json", '{"repeats": 3}', "--set", "repeats=4"),
]

MATMUL = [
    case("sizes", "matmul", "--set", "sizes=16,16,64"),
    case("sizes", "matmul", "--set", "sizes=" + TOO_MANY),
    case("sizes", "matmul", "--set", "sizes=" + ",".join(str(n) for n in range(1, MAX_VALUES + 2))),
    case("sizes", "matmul", "--set", "sizes=" + HUGE),
    case("sizes", "matmul", "--set", "sizes=0"),
    case("sizes", "matmul", "--set", "sizes=16,64.0"),
    case("sizes", "matmul", "--set", "sizes=16,,abc"),
    case("repeats", "matmul", "--set", "repeats=0x10"),
    case("repeats", "matmul", "--set", "repeats=1e3"),
    case("repeats", "matmul", "--set", "repeats=3.5"),
    case("repeats", "matmul", "--set", "repeats=1_000"),
    case("block_seconds", "matmul", "--set", "block_seconds=nan"),
    case("block_seconds", "matmul", "--set", "block_seconds=" + HUGE),
    case("seed", "matmul", "--set", "seed=-1"),
    case("variants", "matmul", "--set", "variants=numpy,numpy"),
    as_json("sizes", "matmul", json.dumps({"sizes": list(range(1, 20_001))})),
    as_json("sizes", "matmul", '{"sizes": "16,64"}'),
    as_json("seed", "matmul", '{"seed": 1' + "0" * 4000 + "}"),
    as_json("repeats", "matmul", '{"repeats": true}'),
    as_json("repeats", "matmul", '{"repeats": {"a": 1}}'),
]

CNN = [
    case("lr", "cnn", "--set", "lr=nan"),
    case("lr", "cnn", "--set", "lr=1e309"),
    case("epochs", "cnn", "--set", "epochs=inf"),
    case("batch_sizes", "cnn", "--set", "batch_sizes=16,16"),
    case("batch_sizes", "cnn", "--set", "batch_sizes=0"),
    case("models", "cnn", "--set", "models=cnn1d,vgg"),
    case("cuda_graph", "cnn", "--set", "cuda_graph=maybe"),
    case("rows", "cnn", "--set", "rows=1000"),               # not a multiple of every batch size
]

TABNET = [
    case("rows", "tabnet", "--set", "rows=3.5"),
    case("epochs", "tabnet", "--set", "epochs=nan"),
    case("batch_sizes", "tabnet", "--set", "batch_sizes=128,128"),
    case("seed", "tabnet", "--set", "seed=1e3"),
    case("cuda_workers", "tabnet", "--set", "cuda_workers=-inf"),
    case("tuned_virtual_batch_size", "tabnet", "--set", "tuned_virtual_batch_size=0x10"),
]

MLP_SURFACE = [
    case("lr", "mlp_surface", "--set", "lr=nan"),
    case("max_point_seconds", "mlp_surface", "--set", "max_point_seconds=inf"),
    case("max_point_seconds", "mlp_surface", "--set", "max_point_seconds=-1e309"),
    case("sweep_grids", "mlp_surface", "--set", "sweep_grids=10,10"),
    case("grid", "mlp_surface", "--set", "grid=1e309"),
    case("batch_size", "mlp_surface", "--set", "batch_size=" + HUGE),
]

IRIS = [
    case("lr", "iris", "--set", "lr=nan"),
    case("block_seconds", "iris", "--set", "block_seconds=1e309"),
    case("log_every", "iris", "--set", "log_every=10,10"),
    case("log_every", "iris", "--set", "log_every=" + ",".join(str(n) for n in range(MAX_VALUES + 1))),
    case("epochs", "iris", "--set", "epochs=-inf"),
    as_json("lr", "iris", '{"lr": NaN}'),
]

JACOBIAN = [
    case("budget_s", "jacobian", "--set", "budget_s=nan"),
    case("memory_fraction", "jacobian", "--set", "memory_fraction=nan"),
    as_json("memory_fraction", "jacobian", '{"memory_fraction": Infinity}'),
    case("per_sample_vals", "jacobian", "--set", "per_sample_vals=1e309"),
    case("vals", "jacobian", "--set", "vals=10,10"),
    case("cpu_threads", "jacobian", "--set", "cpu_threads=nan"),
    as_json("vals", "jacobian", '{"vals": [10, 1e309]}'),
]

CASES = GENERIC + MATMUL + CNN + TABNET + MLP_SURFACE + IRIS + JACOBIAN

NON_FINITE_TEXT = ("nan", "inf", "-inf", "1e309")
NON_FINITE_JSON = ("NaN", "Infinity", "-Infinity", "1e309")


def _number_params():
    for exp in experiments.registry().values():
        for p in exp.all_params():
            if p.kind in (int, float):
                yield exp.name, p


NON_FINITE = [c for c in [case(p.name, name, "--set", f"{p.name}={text}")
                           for name, p in _number_params() for text in NON_FINITE_TEXT]
              + [as_json(p.name, name, f'{{"{p.name}": {text}}}')
                 for name, p in _number_params() for text in NON_FINITE_JSON]
              if c not in CASES]

# Through a real `python -m core run`: the exit status and the absence of a traceback end to end, and
# the memory high-water mark of refusing the big inputs within MAX_REFUSAL_RSS_GROWTH of refusing a small one.
SUBPROCESS_BASELINE = case("block_seconds", "matmul", "--set", "block_seconds=nan")
SUBPROCESS_CASES = [  # few: each process imports torch (seconds of CPU)
    SUBPROCESS_BASELINE,
    case("sizes", "matmul", "--set", "sizes=" + TOO_MANY),
    case("experiment", "x" + HUGE),
]
