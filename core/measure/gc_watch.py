"""The garbage collector's full collections while some code runs: how many, and the seconds they took (gc.callbacks).
A full collection walks every object the process holds, so in a large process one takes a tenth of a second; it
comes when enough objects have reached the collector's oldest generation since the last (a DataLoader's batch of
sample tensors does), so a short timing catches one or none."""
import gc
from contextlib import contextmanager
from dataclasses import dataclass

from core.measure import timing

OLDEST = len(gc.get_threshold()) - 1  # the generation a full collection collects


@dataclass
class Collected:
    count: int = 0
    seconds: float = 0.0


@contextmanager
def full_collections():
    """Yields a Collected that counts the full collections until the block ends."""
    found, started, read = Collected(), [], timing.clock("cpu")  # a collection is the host's work

    def seen(phase: str, info: dict) -> None:
        if info["generation"] != OLDEST:
            return
        if phase == "start":
            started.append(read())
        elif started:
            found.count += 1
            found.seconds += read() - started.pop()

    gc.callbacks.append(seen)
    try:
        yield found
    finally:
        gc.callbacks.remove(seen)
