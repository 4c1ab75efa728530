"""The Jacobian write-up's network (1 -> 20 -> 20 -> 400, tanh) and the ways to differentiate it with
respect to a batch of `val` scalar inputs: the full val x 400 x val x 1 Jacobian (the write-up's call, and
the same with vectorize=True) or only its diagonal blocks, the per-sample val x 400 x 1 Jacobian."""
from typing import Callable

import torch
from torch import nn
from torch.func import jacfwd, jacrev, jvp, vmap

HIDDEN, OUTPUTS = 20, 400
PARAMETERS = (1 + 1) * HIDDEN + (HIDDEN + 1) * HIDDEN + (HIDDEN + 1) * OUTPUTS


def build_model(seed: int) -> nn.Module:
    """Seeded on the CPU (the same weights on every device), in the write-up's layer order."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(1, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, OUTPUTS))


def inputs(seed: int, val: int) -> torch.Tensor:
    """The write-up's t = rand(val) reshaped to (val, 1), from a generator of its own."""
    return torch.rand(val, 1, generator=torch.Generator().manual_seed(seed + 1))


def full_naive(model: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """As written: one backward pass over the whole batch per output element (val x 400 of them)."""
    return torch.autograd.functional.jacobian(lambda t_: model(t_), t)


def full_vectorized(model: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """The same full Jacobian with the backward passes batched by vmap (materialises a
    (400 val) x (400 val) identity)."""
    return torch.autograd.functional.jacobian(lambda t_: model(t_), t, vectorize=True)


def per_sample_jacrev(model: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """Reverse mode per sample: 400 vector-Jacobian products for each sample's one input."""
    return vmap(jacrev(model))(t)


def per_sample_jacfwd(model: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """Forward mode per sample: one Jacobian-vector product per sample."""
    return vmap(jacfwd(model))(t)


def forward_pass(model: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """One forward-mode pass over the whole batch with a ones tangent: since sample i's outputs depend
    only on its own single input, the tangent output row i is exactly sample i's Jacobian."""
    return jvp(model, (t,), (torch.ones_like(t),))[1].unsqueeze(-1)


def diagonal_blocks(full: torch.Tensor) -> torch.Tensor:
    """The per-sample Jacobian (val x 400 x 1) held in a full one (val x 400 x val x 1)."""
    return torch.diagonal(full[..., 0], dim1=0, dim2=2).T.unsqueeze(-1)


Method = Callable[[nn.Module, torch.Tensor], torch.Tensor]
