"""A zoo of small models the cost model was never fitted on, each built by a function of its own for
`python -m core predict --model tests/zoo/models.py:FN --input SHAPE [--train] --check` (benchmarks/zoo_accuracy.py).
Each takes one tensor, batch first, and returns one tensor; each is predicted as a forward and as a training step.
None copies the project's experiments (1-D CNN, LeNet, GRU regressor, TabNet, 2-D points MLP, iris MLP, matmul)."""
import torch
from torch import nn

from core.predict.families import LastStep, MeanPooled

# (name, build function, input as --input takes it)
ZOO = [
    ("residual conv block", "residual_block", "16x16x32x32"),
    ("depthwise-separable conv", "depthwise_separable", "16x32x32x32"),
    ("dilated temporal conv", "dilated_tcn", "16x8x256"),
    ("LSTM classifier", "lstm_classifier", "32x50x16"),
    ("bidirectional GRU tagger", "bigru_tagger", "16x40x32"),
    ("transformer encoder layer", "transformer_encoder", "16x32x64"),
    ("embedding bag MLP", "embedding_bag_mlp", "64x20:int64"),
    ("embedding attention", "embedding_attention", "16x32:int64"),
    ("LayerNorm MLP", "layernorm_mlp", "128x64"),
    ("GroupNorm CNN", "groupnorm_cnn", "16x3x32x32"),
    ("tiny MLP", "tiny_mlp", "4x8"),
    ("wide MLP", "wide_mlp", "64x512"),
]
# The families each entry stands for (one or more)
FAMILIES = {
    "residual conv block": ("conv", "normalisation"),
    "depthwise-separable conv": ("conv",),
    "dilated temporal conv": ("conv",),
    "LSTM classifier": ("recurrent",),
    "bidirectional GRU tagger": ("recurrent",),
    "transformer encoder layer": ("attention", "normalisation"),
    "embedding bag MLP": ("embedding",),
    "embedding attention": ("embedding", "attention"),
    "LayerNorm MLP": ("normalisation",),
    "GroupNorm CNN": ("conv", "normalisation"),
    "tiny MLP": ("tiny",),
    "wide MLP": ("wide",),
}


class _Residual(nn.Module):
    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x):
        return torch.relu(x + self.body(x))


class _Tagger(nn.Module):
    def __init__(self, rnn: nn.Module, head: nn.Module):
        super().__init__()
        self.rnn, self.head = rnn, head

    def forward(self, x):
        return self.head(self.rnn(x)[0])


class _EmbeddingAttention(nn.Module):
    def __init__(self, vocabulary: int, width: int, heads: int, classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.attend = nn.MultiheadAttention(width, heads, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens):
        x = self.embed(tokens)
        return self.head(self.attend(x, x, x, need_weights=False)[0].mean(dim=1))


def residual_block() -> nn.Module:
    """A ResNet basic block at 16 channels: conv-BN-ReLU-conv-BN plus the skip, then ReLU."""
    return _Residual(nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                   nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)))


def depthwise_separable() -> nn.Module:
    """A MobileNet block: a 3x3 depthwise conv over 32 channels, BN, ReLU, a 1x1 conv to 64, BN, ReLU."""
    return nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.Conv2d(32, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())


def dilated_tcn() -> nn.Module:
    """A WaveNet-style stack of 1-D convs dilated 1, 2, 4, 8 over 8 channels of 256 steps, then a 1x1 conv to 4."""
    layers, channels = [], 8
    for dilation in (1, 2, 4, 8):
        layers += [nn.Conv1d(channels, 32, 3, padding=dilation, dilation=dilation), nn.ReLU()]
        channels = 32
    return nn.Sequential(*layers, nn.Conv1d(32, 4, 1))


def lstm_classifier() -> nn.Module:
    """An LSTM (16 features, 64 hidden) over 50 steps, its last step into a Linear to 5 classes."""
    return LastStep(nn.LSTM(16, 64, batch_first=True), nn.Linear(64, 5))


def bigru_tagger() -> nn.Module:
    """A bidirectional GRU (32 features, 32 hidden each way) tagging each of 40 steps with one of 8 tags."""
    return _Tagger(nn.GRU(32, 32, batch_first=True, bidirectional=True), nn.Linear(64, 8))


def transformer_encoder() -> nn.Module:
    """One transformer encoder layer (d_model 64, 4 heads, feed-forward 128), mean-pooled into a Linear to 10."""
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return MeanPooled(layer, nn.Linear(64, 10))


def embedding_bag_mlp() -> nn.Module:
    """The mean of 20 token embeddings (EmbeddingBag, 5,000 x 32) per row, into a 32-64-4 MLP."""
    return nn.Sequential(nn.EmbeddingBag(5000, 32, mode="mean"), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


def embedding_attention() -> nn.Module:
    """Token embeddings (2,000 x 32) through 4-head self-attention, mean-pooled into a Linear to 3."""
    return _EmbeddingAttention(2000, 32, 4, 3)


def layernorm_mlp() -> nn.Module:
    """Four Linear-LayerNorm-GELU blocks of width 64, then a Linear to 1."""
    blocks = [module for _ in range(4) for module in (nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU())]
    return nn.Sequential(*blocks, nn.Linear(64, 1))


def groupnorm_cnn() -> nn.Module:
    """Two conv-GroupNorm-ReLU stages (3 -> 16 -> 32 channels, the second strided), pooled into a Linear to 10."""
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GroupNorm(8, 32), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def tiny_mlp() -> nn.Module:
    """An 8-8-2 MLP: host-bound, its time all dispatch."""
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def wide_mlp() -> nn.Module:
    """A 512-4096-512 MLP: compute-bound forward, its training step much of it Adam over 4.2 M parameters."""
    return nn.Sequential(nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 512))
