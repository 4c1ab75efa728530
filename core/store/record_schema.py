"""The JSON schema of a results record, as data: the type of every field a reader of a record uses, and
the keys it indexes, so that a record that passes can be read without checking anything again. Checked
with jsonschema when a record is loaded; a record that fails is skipped with the field named.

Schema 1 and schema 2 share one shape: schema 2 added a row's unit, per_call, torch_threads, warm-up
samples and cold flag, and the record's code_version and environment, all optional to a reader; later, a row's
thread setting (`threads_setting`: default, cores or a number) and a GPU row's precision (TF32, cuDNN benchmark). A row
may carry a census and a breakdown (objects); a record may carry the stand-in censuses of the points a GPU
would run (`standin`) and how many it planned (`standins_planned`). Fields not named here are allowed, so a
record written by a newer Crossover still loads.

The cost of checking is bounded: jsonschema spends tens of microseconds on each value it descends into,
so the lists it walks are capped (a cap is written before `items`: keywords are checked in the order
written and checking stops at the first error, so an overlong list is refused unwalked), and a list of
samples is checked as a whole by the 'number-list' format."""
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import FormatError

DEFAULT_THREADS = "default"  # a row's threads_setting when torch's intra-op threads were left as they are
STATUSES = ("running", "complete", "partial", "failed", "cancelled")
MAX_ROWS = 10_000     # the points one record holds (RecordWriter refuses to start a run planned larger)
MAX_NAMES = 64        # a point's parameters; a run's variants or devices; a machine's GPUs
MESSAGE_CHARS = 200   # a failure names the field in full but cuts the message (it can hold a huge value)

FORMATS = FormatChecker(formats=())


@FORMATS.checks("number-list")
def _is_number_list(value) -> bool:
    """Every item a JSON number (not a boolean), checked in one pass at C speed. The error says what else
    the list holds (jsonschema's own message would print the whole list)."""
    others = set(map(type, value)) - {int, float} if isinstance(value, list) else ()
    if others:
        raise FormatError(f"not a list of numbers: it holds {', '.join(sorted(t.__name__ for t in others))} "
                          "values")
    return True


_TEXT = {"type": "string"}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_INT_OR_NULL = {"type": ["integer", "null"]}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_FLAG_OR_NULL = {"type": ["boolean", "null"]}
_OBJECT_OR_NULL = {"type": ["object", "null"]}
_NUMBERS_OR_NULL = {"type": ["array", "null"], "format": "number-list"}
_NAMES = {"type": "array", "maxItems": MAX_NAMES, "items": _TEXT}

_GPU = {
    "type": "object",
    "required": ["device", "name"],
    "properties": {"device": _TEXT, "name": _TEXT, "memory_gib": _NUMBER_OR_NULL,
                   "compute_capability": _TEXT_OR_NULL, "cuda_driver": _TEXT_OR_NULL},
}

_FINGERPRINT = {
    "type": "object",
    "required": ["cpu_model", "cpu_logical_cores"],
    "properties": {
        "cpu_model": _TEXT, "cpu_signature": _TEXT_OR_NULL, "cpu_physical_cores": _INT_OR_NULL,
        "cpu_logical_cores": _INT_OR_NULL,
        "torch_threads": _INT_OR_NULL, "memory_gib": _NUMBER_OR_NULL, "os": _TEXT_OR_NULL,
        "python": _TEXT_OR_NULL, "torch": _TEXT_OR_NULL, "numpy": _TEXT_OR_NULL, "cuda": _TEXT_OR_NULL,
        "cudnn": _INT_OR_NULL, "gpus": {"type": "array", "maxItems": MAX_NAMES, "items": _GPU},
        "mps": {"type": "boolean"}, "machine_id": _TEXT,
    },
}

# A parameter's value becomes a column that points are grouped and joined on: a single value.
_PARAMS = {"type": "object", "maxProperties": MAX_NAMES,
           "additionalProperties": {"type": ["string", "number", "boolean", "null"]}}

_ROW = {
    "type": "object",
    "required": ["device", "variant", "params"],
    "properties": {
        "device": _TEXT, "variant": _TEXT, "params": _PARAMS, "metrics": {"type": "object"},
        "status": _TEXT, "error": _TEXT_OR_NULL, "unit": _TEXT_OR_NULL, "per_call": {"type": "integer"},
        "torch_threads": _INT_OR_NULL, "threads_setting": _TEXT_OR_NULL, "tf32_matmul": _FLAG_OR_NULL,
        "tf32_cudnn": _FLAG_OR_NULL, "cudnn_benchmark": _FLAG_OR_NULL, "samples": _NUMBERS_OR_NULL, "warmup_samples": _NUMBERS_OR_NULL,
        "median": _NUMBER_OR_NULL, "iqr": _NUMBER_OR_NULL, "noisy": _FLAG_OR_NULL, "n": _INT_OR_NULL,
        "cold": _FLAG_OR_NULL, "stopped": _TEXT_OR_NULL, "half_width": _NUMBER_OR_NULL, "census": _OBJECT_OR_NULL, "breakdown": _OBJECT_OR_NULL,
    },
}


# The census of a point built for a GPU on the meta device (core.measure.standin): what the cost model predicts from.
_STANDIN = {
    "type": "object",
    "required": ["variant", "params", "census"],
    "properties": {"variant": _TEXT, "params": _PARAMS, "unit": _TEXT_OR_NULL, "per_call": {"type": "integer"},
                   "census": {"type": "object"}},
}


def _record(version: int) -> dict:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Crossover results record, schema {version}",
        "type": "object",
        "required": ["schema", "run_id", "experiment", "status", "machine_id", "fingerprint", "rows"],
        "properties": {
            "schema": {"const": version}, "run_id": {"type": "string", "minLength": 1}, "experiment": _TEXT,
            "preset": _TEXT_OR_NULL, "status": {"enum": list(STATUSES)}, "machine_id": _TEXT,
            "fingerprint": _FINGERPRINT, "rows": {"type": "array", "maxItems": MAX_ROWS, "items": _ROW},
            "variants": _NAMES, "devices": _NAMES, "config": {"type": "object"}, "started": _TEXT_OR_NULL,
            "ended": _TEXT_OR_NULL, "planned_points": _INT_OR_NULL, "error": _TEXT_OR_NULL,
            "environment": _OBJECT_OR_NULL,
            "standin": {"type": "array", "maxItems": MAX_ROWS, "items": _STANDIN}, "standins_planned": _INT_OR_NULL,
            "code_version": {"type": ["object", "null"],
                             "properties": {"commit": _TEXT_OR_NULL, "dirty": _FLAG_OR_NULL,
                                            "package": _TEXT_OR_NULL}},
        },
    }


SCHEMAS = {version: _record(version) for version in (1, 2)}
_VALIDATORS = {version: Draft202012Validator(schema, format_checker=FORMATS) for version, schema in SCHEMAS.items()}


def problem(record: dict, version: int) -> str | None:
    """None when `record` is a valid record of schema `version`; else its first failure, as
    'FIELD: what is wrong' (FIELD a path such as rows/0/params)."""
    error = next(_VALIDATORS[version].iter_errors(record), None)
    if error is None:
        return None
    field = "/".join(map(str, error.absolute_path)) or "(the record)"
    return f"{field}: {_cut(error.message)}"


def _cut(text: str) -> str:
    if len(text) <= MESSAGE_CHARS:
        return text
    return text[:MESSAGE_CHARS - 60] + " … " + text[-57:]  # the end says what was expected
