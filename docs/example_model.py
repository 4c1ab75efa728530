"""An example of your own model for `python -m core predict --model docs/example_model.py:build --input 512x84`:
a small MLP on 84 features. Copy this file, put your network in build(), and give --input your batch's shape."""
from torch import nn


def build() -> nn.Module:
    return nn.Sequential(nn.Linear(84, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
