"""The Flux write-up's regression network (2 -> 20 -> 5 -> 1, ReLU) fitted to MATLAB's peaks surface,
and the three training loops Crossover times: full batch as written, minibatches from a DataLoader, and
the tuned step (a CUDA graph on CUDA, through core.measure.graphs) that reads the loss back only once, at the end."""
from functools import lru_cache
from itertools import islice

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from core import devices
from core.measure import graphs

AS_WRITTEN = "as written"
WITH_LOADER = "with DataLoader"
TUNED = "tuned"
LOW, HIGH = -3.0, 3.0
SURFACE_GRID = 40  # the write-up evaluates the learned surface on 40 x 40 points


def peaks(x, y):
    """MATLAB's peaks function, elementwise on tensors."""
    return (3 * (1 - x) ** 2 * torch.exp(-x**2 - (y + 1) ** 2)
            - 10 * (x / 5 - x**3 - y**5) * torch.exp(-x**2 - y**2)
            - torch.exp(-(x + 1) ** 2 - y**2) / 3)


@lru_cache(maxsize=4)
def grid_data(side: int) -> tuple[torch.Tensor, torch.Tensor]:
    """side x side points on [-3, 3]^2 as (side², 2) inputs with x varying fastest (the write-up's
    `repeat(x1, outer=N), repeat(x2, inner=N)`), and the (side², 1) peaks targets; float32, CPU."""
    axis = torch.linspace(LOW, HIGH, side)
    x, y = axis.repeat(side), axis.repeat_interleave(side)
    return torch.stack([x, y], dim=1), peaks(x, y).unsqueeze(1)


def surface_axis() -> list[float]:
    return torch.linspace(LOW, HIGH, SURFACE_GRID).tolist()


def target_surface() -> list[float]:
    """The peaks surface on the 40 x 40 evaluation grid, in the learned surfaces' order."""
    return grid_data(SURFACE_GRID)[1].flatten().tolist()


def initial_network(seed: int) -> nn.Sequential:
    """The network with Flux's Dense initialisation (Glorot-uniform weights, zero biases), drawn on the
    CPU from its own seeded generator, so every device starts from the same weights."""
    net = nn.Sequential(nn.Linear(2, 20), nn.ReLU(), nn.Linear(20, 5), nn.ReLU(), nn.Linear(5, 1))
    generator = torch.Generator().manual_seed(seed)
    for layer in net:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight, generator=generator)
            nn.init.zeros_(layer.bias)
    return net


class Trainer:
    """One device's network, Adam state and data. Every `train` call starts again from the seeded
    weights and a fresh Adam state, and returns the loss of each epoch as host floats."""

    def __init__(self, mode: str, device: str, side: int, seed: int, lr: float, batch_size: int):
        x, y = grid_data(side)
        self.mode, self.device = mode, device
        self.model = initial_network(seed).to(device)
        self.wants_graph = mode == TUNED and devices.plays(device) == "cuda"
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr, capturable=self.wants_graph)
        self.start = graphs.StartingPoint(self.model.parameters(), self.optimizer)
        self.x, self.y = x.to(device), y.to(device)
        # the DataLoader variant keeps the data on the host and moves every minibatch, as usually written
        self.loader = DataLoader(TensorDataset(x, y), batch_size=batch_size) if mode == WITH_LOADER else None
        self.steps_per_epoch = len(self.loader) if self.loader else 1
        self.last_loss = torch.zeros((), device=device)  # the tuned step's loss, in place for a captured graph
        self.tuned_step, self.graph_error = graphs.replay_or_eager(self._full_batch_step, device,
                                                                   self.model.parameters(), enabled=self.wants_graph)
        self.cuda_graph = self.wants_graph and self.graph_error is None
        self.start.restore()  # the capture's warm-up steps and checking replay trained the network

    def train(self, epochs: int) -> list[float]:
        """Train from the seeded weights and a fresh Adam state (restored in place)."""
        self.start.restore()
        if self.mode == WITH_LOADER:
            return [self._loader_epoch() for _ in range(epochs)]
        if self.mode == TUNED:
            return self._tuned(epochs)
        # Flux.train! checks at every step that the loss is finite, which reads it back to the host
        return [self._step(self.x, self.y).item() for _ in range(epochs)]

    def train_steps(self, steps: int) -> None:
        """Train `steps` steps from the seeded state: the first `steps` minibatches of an epoch for the
        DataLoader variant, `steps` full-batch epochs otherwise (a bounded time probe)."""
        if self.mode != WITH_LOADER:
            self.train(steps)
            return
        self.start.restore()
        for xb, yb in islice(self.loader, steps):
            self._step(xb.to(self.device), yb.to(self.device)).item()

    @torch.no_grad()
    def final_mse(self) -> float:
        return F.mse_loss(self.model(self.x), self.y).item()

    @torch.no_grad()
    def surface(self) -> list[float]:
        """The learned surface on the 40 x 40 grid, x varying fastest."""
        x, _ = grid_data(SURFACE_GRID)
        return self.model(x.to(self.device)).flatten().cpu().tolist()

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss

    def _loader_epoch(self) -> float:
        losses = [self._step(xb.to(self.device), yb.to(self.device)).item() for xb, yb in self.loader]
        return sum(losses) / len(losses)

    def _full_batch_step(self) -> None:
        self.last_loss.copy_(self._step(self.x, self.y).detach())

    def _tuned(self, epochs: int) -> list[float]:
        losses = torch.empty(epochs, device=self.device)
        for epoch in range(epochs):
            self.tuned_step()
            losses[epoch] = self.last_loss
        return losses.tolist()  # the only read back to the host
