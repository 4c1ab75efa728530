"""The CNN experiment's three networks and their generated data: the write-up's 1-D `BaseModel`, the
PyTorch MNIST example network (the 2-D contrast) and a small GRU regressor (the recurrent contrast)."""
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from core import devices
from core.measure import graphs
from core.datasets import FEATURES, random_regression

IMAGE_SIDE = 28
CLASSES = 10
TEMPLATE_SCALE = 0.3
SEQUENCE_STEPS = 32
SEQUENCE_FEATURES = 16
GRU_HIDDEN = 64
CONTRAST_VALIDATION_ROWS = 500  # at most, for the contrasts (the 1-D model's is the write-up's 2000 rows)


class BaseModel(nn.Module):
    """The write-up's 1-D CNN, layer for layer: 84 features -> 1 output, mish activations."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(84, 16)
        self.fc2 = nn.Linear(16, 1)
        self.conv1 = nn.Conv1d(1, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(8, 16, kernel_size=3, padding=1)
        self.pool = nn.MaxPool1d(kernel_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.mish(self.fc1(x))
        x = x.view(-1, 1, 16)
        x = F.mish(self.conv1(x))
        x = self.pool(x)
        x = F.mish(self.conv2(x))
        x = torch.max(x, dim=2)[0]
        return self.fc2(x)


class MnistNet(nn.Module):
    """The classic PyTorch MNIST example network: 1x28x28 images -> log-probabilities of 10 classes."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
        return F.log_softmax(self.fc2(x), dim=1)


class GruRegressor(nn.Module):
    """One GRU layer (16 features -> 64 hidden) over 32-step sequences, its last state -> 1 output."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(SEQUENCE_FEATURES, GRU_HIDDEN, batch_first=True)
        self.head = nn.Linear(GRU_HIDDEN, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, last = self.gru(x)
        return self.head(last[-1])


Data = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # train x, y, validation x, y


@lru_cache(maxsize=2)
def synthetic_images(rows: int, seed: int = 0) -> Data:
    """MNIST-shaped images: each class has a fixed random 28x28 template, an image is a faint copy of
    its class's template under unit noise, so the network has something (not too easy) to learn."""
    g = torch.Generator().manual_seed(seed)
    templates = TEMPLATE_SCALE * torch.randn(CLASSES, 1, IMAGE_SIDE, IMAGE_SIDE, generator=g)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(CLASSES, (n,), generator=g)
        return templates[labels] + torch.randn(n, 1, IMAGE_SIDE, IMAGE_SIDE, generator=g), labels
    return (*draw(rows), *draw(min(rows, CONTRAST_VALIDATION_ROWS)))


@lru_cache(maxsize=2)
def sequences(rows: int, seed: int = 0) -> Data:
    """Random multi-feature sequences; the target is the sum of the first feature over the sequence,
    scaled to unit variance (learnable, unlike the 1-D write-up's random labels)."""
    g = torch.Generator().manual_seed(seed)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, SEQUENCE_STEPS, SEQUENCE_FEATURES, generator=g)
        return x, x[:, :, :1].sum(dim=1) / SEQUENCE_STEPS ** 0.5
    return (*draw(rows), *draw(min(rows, CONTRAST_VALIDATION_ROWS)))


@dataclass(frozen=True)
class ModelSpec:
    """A network, its data and its loss; `published_rows` is the training-set size of the write-up's
    timing (None when it published no absolute time). For the memory estimate: `row_bytes` of one generated
    row (input and target), `building_copies` input-sized arrays alive at once while generating, and
    `sample_bytes` per sample of a training batch (saved activations and their gradients: the peak RSS
    growth of a training step measured on a CPU, per sample between batches 256 and 2048, rounded up)."""
    build: Callable[[], nn.Module]
    data: Callable[[int, int], Data]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    published_rows: int | None
    row_bytes: int
    building_copies: int
    sample_bytes: int


MODELS = {
    # measured 6 kB per sample
    "cnn1d": ModelSpec(BaseModel, random_regression, F.mse_loss, 1_000_000, (FEATURES + 1) * 4, 1, 8_000),
    # int64 labels; drawing keeps the gathered templates, the noise and their sum; measured 530 kB per sample
    "mnist": ModelSpec(MnistNet, synthetic_images, F.nll_loss, 60_000, IMAGE_SIDE**2 * 4 + 8, 3, 640_000),
    # measured 95 kB (tuned) and 135 kB (as written) per sample
    "gru": ModelSpec(GruRegressor, sequences, F.mse_loss, None, (SEQUENCE_STEPS * SEQUENCE_FEATURES + 1) * 4, 1,
                     160_000),
}


def build(model: str, seed: int) -> nn.Module:
    """The network with seeded initial weights, built on the CPU (so every device starts from the
    same weights once it is moved)."""
    torch.manual_seed(seed)
    return MODELS[model].build()


def weights_checksum(model: nn.Module) -> float:
    """The sum of absolute weights: equal figures mean equal starting weights."""
    with torch.no_grad():
        return float(sum(p.detach().abs().sum().cpu() for p in model.parameters()))


# -- the two ways of training ---------------------------------------------------------------------
class AsWritten:
    """The write-up's loop: a DataLoader over a TensorDataset in host memory, each batch copied to
    the device, the loss read back (`.item()`, a host synchronisation) every step."""
    graphed = False
    graph_error = None
    fused = False

    def __init__(self, model: nn.Module, loss: Callable, x: torch.Tensor, y: torch.Tensor, batch: int,
                 device: str, seed: int, lr: float, cuda_graph: bool = False):
        self.model, self.loss, self.device = model, loss, device
        self.loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True,
                                 generator=torch.Generator().manual_seed(seed))
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.mean_loss = float("nan")

    def epoch(self) -> None:
        self.model.train()
        total = 0.0
        for xb, yb in self.loader:
            xb, yb = xb.to(self.device), yb.to(self.device)
            self.optimizer.zero_grad()
            loss = self.loss(self.model(xb), yb)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        self.mean_loss = total / len(self.loader)

    def train_loss(self) -> float:
        """The mean training loss of the last epoch."""
        return self.mean_loss


class Tuned:
    """Data resident on the device; each epoch draws a permutation there and gathers every batch by
    index; the loss is summed on the device and read only after the epoch; fused Adam. On CUDA the
    whole step (gather, forward, backward, optimiser) is captured once as a CUDA graph and replayed
    (core.measure.graphs); when capture fails the step runs eagerly and `graph_error` says why."""

    def __init__(self, model: nn.Module, loss: Callable, x: torch.Tensor, y: torch.Tensor, batch: int,
                 device: str, seed: int, lr: float, cuda_graph: bool = True):
        self.model, self.loss, self.device, self.batch = model, loss, device, batch
        self.x, self.y = x.to(device), y.to(device)
        self.steps = len(x) // batch
        self.generator = devices.generator(device, seed)
        self.fused = devices.plays(device) in ("cpu", "cuda")
        capturable = cuda_graph and devices.plays(device) == "cuda"
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=self.fused, capturable=capturable)
        self.loss_sum = torch.zeros((), device=device)
        self.step, self.graphed, self.graph_error = self._replay_or_eager(cuda_graph)

    def epoch(self) -> None:
        self.model.train()
        self.loss_sum.zero_()
        order = torch.randperm(len(self.x), device=self.device, generator=self.generator)
        for index in order.view(self.steps, self.batch):
            self.step(index)

    def train_loss(self) -> float:
        """The mean training loss of the last epoch (one read, after it)."""
        return float(self.loss_sum) / self.steps

    def _eager_step(self, index: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.model(self.x[index]), self.y[index])
        loss.backward()
        self.optimizer.step()
        self.loss_sum += loss.detach()

    def _replay_or_eager(self, cuda_graph: bool) -> tuple[Callable[[torch.Tensor], None], bool, str | None]:
        """The step to run per batch, whether it replays a CUDA graph, and why capture failed. The graph
        reads its batch indices from a static tensor, so each batch's are copied in before a replay.
        Capture trains the model (warm-up steps, a checking replay): the weights and the optimiser's
        state are put back afterwards, in place (the graph holds their addresses)."""
        static_index = torch.arange(self.batch, device=self.device)
        eager = partial(self._eager_step, static_index)
        start = graphs.StartingPoint(self.model.parameters(), self.optimizer)
        replay, error = graphs.replay_or_eager(eager, self.device, self.model.parameters(), cuda_graph)
        start.restore()
        if replay is eager:
            return self._eager_step, False, error

        def step(index: torch.Tensor) -> None:
            static_index.copy_(index)
            replay()
        return step, True, None


TRAINERS = {"as written": AsWritten, "tuned": Tuned}
VALIDATION_CHUNK = 500


def validation_loss(model: nn.Module, loss: Callable, x: torch.Tensor, y: torch.Tensor, device: str) -> float:
    """The loss over the validation set in evaluation mode, in chunks (the MNIST network's activations
    take 150 kB per image)."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for xs, ys in zip(x.split(VALIDATION_CHUNK), y.split(VALIDATION_CHUNK)):
            total += float(loss(model(xs.to(device)), ys.to(device))) * len(xs)
    model.train()
    return total / len(x)
