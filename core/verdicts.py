"""A verdict on one of a write-up's claims, computed from the records."""
from dataclasses import dataclass

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NEEDS_GPU = "needs a GPU to tell"
NO_DATA = "no data yet"


@dataclass(frozen=True)
class Verdict:
    claim: str
    outcome: str
    evidence: str


def within_factor(measured: float, published: float, factor: float = 2.0) -> bool:
    return published / factor <= measured <= published * factor
