"""The write-up's Iris classifier (4 -> 10 -> 3 MLP), its data, and the training loops that differ only
in how the loss comes back to the host: `loss.item()` every k epochs (as written), or every loss written
into a preallocated device buffer and read once at the end (tuned; on CUDA its step is replayed as a
CUDA graph through core.measure.graphs)."""
from functools import lru_cache

import torch
from torch import nn

from core.measure import graphs

# Steps core.measure.graphs runs before handing back a captured step (its warm-up steps, the captured call and
# one checking replay): each may write a loss at the cursor, so the buffer has room for them past the
# last epoch (an out-of-range index_copy_ on CUDA is a device-side assert).
CAPTURE_STEPS = graphs.WARMUP_STEPS + 2


class IrisMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 10)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(10, 3)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


@lru_cache(maxsize=1)
def iris_data() -> tuple[torch.Tensor, torch.Tensor]:
    """All 150 samples with each feature min-max scaled to [0, 1], and the labels 0..2."""
    # imported here: scikit-learn takes over a second to import, and every page imports the experiments
    from sklearn.datasets import load_iris
    bunch = load_iris()
    low, high = bunch.data.min(axis=0), bunch.data.max(axis=0)
    features = (bunch.data - low) / (high - low)
    return torch.tensor(features, dtype=torch.float32), torch.tensor(bunch.target, dtype=torch.long)


def initial_model(seed: int) -> IrisMLP:
    """Seeded weights built on the CPU (without touching the global generator), so every device
    starts from the same model."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return IrisMLP()


class Training:
    """One device's model, data and SGD optimiser for a fixed number of full-batch epochs. Every loop
    starts from the seeded weights, leaves the losses the host received in `logged` as (epoch, loss)
    pairs, and reads device tensors only through `_read_one`/`_read_buffer`, which count the reads."""

    def __init__(self, device: str, seed: int, lr: float, epochs: int):
        x, y = iris_data()
        self.device, self.epochs = device, epochs
        self.x, self.y = x.to(device), y.to(device)
        self.model = initial_model(seed).to(device)
        self.start = graphs.StartingPoint(self.model.parameters())  # plain SGD keeps no state
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()
        self.losses = torch.zeros(epochs + CAPTURE_STEPS, device=device)
        self.cursor = torch.zeros(1, dtype=torch.long, device=device)
        self.recorded_step = self.step_and_record
        self.reads = 0
        self.logged: list[tuple[int, float]] = []

    def step(self) -> torch.Tensor:
        loss = self.criterion(self.model(self.x), self.y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def step_and_record(self) -> None:
        """One step, its loss written at the device-side cursor (no host read, so it can be captured)."""
        loss = self.step()
        self.losses.index_copy_(0, self.cursor, loss.detach().view(1))
        self.cursor.add_(1)

    def use_graph(self, enabled: bool = True) -> str | None:
        """Replay `step_and_record` as a CUDA graph from now on where the device allows it; returns the
        capture error, if capture was tried and failed (the eager step stays then)."""
        self.recorded_step, error = graphs.replay_or_eager(self.step_and_record, self.device,
                                                           self.model.parameters(), enabled)
        return error

    @property
    def graphed(self) -> bool:
        return self.recorded_step != self.step_and_record

    def reset(self) -> None:
        """Back to the seeded weights (in place: a captured graph keeps using the same memory)."""
        self.reads = 0
        self.start.restore()

    # -- the loops ---------------------------------------------------------------------------------
    def as_written(self, log_every: int) -> None:
        """The write-up's loop: `loss.item()` after every `log_every`-th step; 0 never reads."""
        self.reset()
        self.logged = []
        for epoch in range(1, self.epochs + 1):
            loss = self.step()
            if log_every and epoch % log_every == 0:
                self.logged.append((epoch, self._read_one(loss)))

    def buffered(self) -> None:
        """Every epoch's loss goes into the device buffer (a graph replay per epoch after `use_graph`);
        one read at the end."""
        self.reset()
        self.cursor.zero_()
        for _ in range(self.epochs):
            self.recorded_step()
        self.logged = self._read_buffer()

    # -- results -----------------------------------------------------------------------------------
    def evaluate(self) -> tuple[float, float]:
        """Cross-entropy and accuracy of the current weights on the whole data set (outside any timing)."""
        with torch.no_grad():
            logits = self.model(self.x)
            loss = self.criterion(logits, self.y)
            accuracy = (logits.argmax(dim=1) == self.y).float().mean()
        return float(loss.cpu()), float(accuracy.cpu())

    def _read_one(self, loss: torch.Tensor) -> float:
        self.reads += 1
        return loss.item()

    def _read_buffer(self) -> list[tuple[int, float]]:
        self.reads += 1
        return list(enumerate(self.losses[:self.epochs].cpu().tolist(), start=1))


def thinned(logged: list[tuple[int, float]], at_most: int = 200) -> list[tuple[int, float]]:
    """At most `at_most` evenly spaced (epoch, loss) pairs, always keeping the last."""
    if len(logged) <= at_most:
        return logged
    stride = len(logged) / at_most
    picked = [logged[int(i * stride)] for i in range(at_most - 1)]
    return picked + [logged[-1]]
