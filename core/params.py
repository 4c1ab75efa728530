"""Typed, bounded experiment parameters, and the error that names the field and what it allows."""
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A bad value for a named field; the message says what is allowed."""
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Param:
    """One parameter. `kind` is int, float, str or bool; `many` makes it a tuple of such values.
    Numbers are bounded by `low`..`high` (inclusive); strings may be limited to `choices`."""
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
        return f"a comma-separated list, each {what}" if self.many else what

    def parse(self, text: str) -> Any:
        """Convert command-line text ('16,200,4096' for a list) and check it."""
        items = [t.strip() for t in str(text).split(",")] if self.many else [str(text).strip()]
        try:
            values = tuple(self._convert(t) for t in items if t != "")
        except ValueError:
            raise ConfigError(self.name, f"'{text}' is not {self.allowed()}") from None
        return self.check(values if self.many else (values[0] if values else ""))

    def _convert(self, text: str):
        if self.kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if self.kind is int:
            number = float(text)
            if not number.is_integer():
                raise ValueError(text)
            return int(number)
        return self.kind(text)

    def check(self, value: Any) -> Any:
        """Return the value normalised (tuples for lists), or raise ConfigError."""
        values = tuple(value) if self.many and isinstance(value, (list, tuple)) else (value,)
        if self.many and not values:
            raise ConfigError(self.name, f"needs at least one value; allowed: {self.allowed()}")
        for v in values:
            self._check_one(v)
        return values if self.many else value

    def _check_one(self, v: Any) -> None:
        ok_type = isinstance(v, self.kind) and not (self.kind is not bool and isinstance(v, bool))
        if self.kind is float and isinstance(v, int) and not isinstance(v, bool):
            ok_type = True
        if not ok_type:
            raise ConfigError(self.name, f"{v!r} is not {self.allowed()}")
        if self.choices and v not in self.choices:
            raise ConfigError(self.name, f"{v!r} is not allowed; allowed: {self.allowed()}")
        if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
            raise ConfigError(self.name, f"{v} is out of range; allowed: {self.allowed()}")
