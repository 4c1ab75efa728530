"""Typed, bounded experiment parameters, and the error that names the field and what it allows.

What a value may be: an int is written in decimal digits with an optional sign ('1000'; not '1e3',
'1000.0', '0x10' or '1_000'); a float is any finite number in its range (never nan or inf); a list
holds at least one and at most MAX_VALUES values, each once. An error echoes a bad value cut to
SHOWN_CHARS characters, so a huge input never comes back whole."""
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRESETS = ("smoke", "quick", "paper")  # every experiment's: seconds (tests), the rerun default, the write-up's scale
MAX_VALUES = 64     # the most values a list parameter takes: each is a point (or more) of a run
SHOWN_CHARS = 40    # an error message shows at most this much of a bad value, then '…'
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_WRITTEN_AS = {int: "an int written in digits", float: "a number", bool: "true or false (yes/no, on/off, 1/0)"}
_TRUTH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def clip(text: str, chars: int = SHOWN_CHARS) -> str:
    """`text` cut to `chars` characters, '…' marking a cut."""
    return text if len(text) <= chars else text[:chars] + "…"


def shown(value: Any) -> str:
    """A value as an error message echoes it: its repr, clipped."""
    if isinstance(value, str):  # clipped inside its quotes
        return repr(clip(value))
    try:
        return clip(repr(value))
    except ValueError:  # an int past Python's digit limit for printing
        return "an int too long to print"


def file_path(text: str, field: str) -> Path:
    """A file named on the command line; an empty name is refused (Path('') would be the folder here)."""
    if not text.strip():
        raise ConfigError(field, "name a file (the name given is empty)")
    return Path(text)


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class ConfigError(ValueError):
    """A bad value for a named field; the message says what is allowed."""
    def __init__(self, field: str, message: str):
        field = clip(str(field))  # the field can be a name the user typed
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Param:
    """One parameter. `kind` is int, float, str or bool; `many` makes it a tuple of such values
    (1 to MAX_VALUES of them, no value twice). Numbers are finite and bounded by `low`..`high`
    (inclusive); strings may be limited to `choices`."""
    name: str
    kind: type
    default: Any
    help: str = ""
    low: float = None
    high: float = None
    choices: tuple = None
    many: bool = False

    def allowed(self) -> str:
        if self.choices:
            what = "one of " + ", ".join(map(str, self.choices))
        elif self.low is not None or self.high is not None:
            what = f"{self.kind.__name__} from {self.low} to {self.high}"
        else:
            what = self.kind.__name__
        return f"a comma-separated list of at most {MAX_VALUES} different values, each {what}" if self.many else what

    def parse(self, text: str) -> Any:
        """Convert command-line text ('16,200,4096' for a list) and check it."""
        items = [t.strip() for t in str(text).split(",")] if self.many else [str(text).strip()]
        if items == [""]:
            if not self.many:
                raise ConfigError(self.name, f"needs a value; allowed: {self.allowed()}")
            items = []
        if "" in items:  # '16,,64' or '16,': a value left out, not one fewer point
            raise ConfigError(self.name, f"{shown(str(text))} has an empty value between commas; allowed: "
                                         f"{self.allowed()}")
        if self.many:
            self._check_count(items)
        values = tuple(self._convert(t) for t in items)
        return self.check(values if self.many else values[0])

    def _convert(self, text: str):
        """The value `text` spells, of this parameter's kind (its range is checked later)."""
        if self.kind is str:
            return text
        if self.kind is bool and text.lower() in _TRUTH:
            return _TRUTH[text.lower()]
        if self.kind is int and _INT_TEXT.fullmatch(text):
            return self._whole_number(text)
        number = _float_or_none(text) if self.kind is float else None
        if number is None:
            raise ConfigError(self.name, f"{shown(text)} is not {_WRITTEN_AS[self.kind]}; allowed: {self.allowed()}")
        if not math.isfinite(number):  # echo '1e309' as typed, not as inf
            raise ConfigError(self.name, f"{shown(text)} is not a finite number; allowed: {self.allowed()}")
        return number

    def _whole_number(self, digits: str) -> int:
        try:
            return int(digits)
        except ValueError:  # more digits than Python converts: far past any bound
            raise ConfigError(self.name, f"{shown(digits)} is out of range; allowed: {self.allowed()}") from None

    def check(self, value: Any) -> Any:
        """Return the value normalised (tuples for lists), or raise ConfigError."""
        values = tuple(value) if self.many and isinstance(value, (list, tuple)) else (value,)
        if self.many:
            self._check_count(values)
        for v in values:
            self._check_one(v)
        if self.many:
            self._check_distinct(values)
        return values if self.many else value

    def _check_count(self, values) -> None:
        """Counted before any value is converted, so a list of 20,000 values costs nothing to refuse."""
        if not values:
            raise ConfigError(self.name, f"needs at least one value; allowed: {self.allowed()}")
        if len(values) > MAX_VALUES:
            raise ConfigError(self.name, f"{len(values)} values are more than the {MAX_VALUES} a list may hold; "
                                         f"allowed: {self.allowed()}")

    def _check_distinct(self, values: tuple) -> None:
        seen = set()
        for v in values:
            if v in seen:
                raise ConfigError(self.name, f"{shown(v)} is given twice; allowed: {self.allowed()}")
            seen.add(v)

    def _check_one(self, v: Any) -> None:
        ok_type = isinstance(v, self.kind) and not (self.kind is not bool and isinstance(v, bool))
        if self.kind is float and isinstance(v, int) and not isinstance(v, bool):
            ok_type = True
        if not ok_type:
            raise ConfigError(self.name, f"{shown(v)} is a {type(v).__name__}, not {self.kind.__name__}; "
                                         f"allowed: {self.allowed()}")
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(self.name, f"{shown(v)} is not a finite number; allowed: {self.allowed()}")
        if self.choices and v not in self.choices:
            raise ConfigError(self.name, f"{shown(v)} is not allowed; allowed: {self.allowed()}")
        if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
            raise ConfigError(self.name, f"{shown(v)} is out of range; allowed: {self.allowed()}")
