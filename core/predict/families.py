"""Your model described with a form: a family (an MLP, a CNN, a recurrent net, a transformer encoder, an embedding
bag) and its sizes, which project code builds from torch.nn (nothing the user types is run). Every model takes one
tensor, batch first (token ids for the embedding family), and returns one tensor. `source` writes the same model as a
file for `python -m core predict --model`; `to_query`/`from_query` keep a description in a page's URL."""
import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from core.params import ConfigError, shown
from core.predict.ownmodel import MAX_ELEMENTS, Input

MODES = ("inference", "training")
WHOLE_NUMBER = re.compile(r"[0-9]{1,15}")  # a query's text, as ownmodel reads a size
FAMILY_KEY = "family"


@dataclass(frozen=True)
class Field:
    """One value of the form: a whole number from `low` to `high`, or one of `choices`."""
    name: str
    label: str
    default: int | str
    low: int = 1
    high: int = 1
    help: str = ""
    choices: tuple[str, ...] = ()

    @property
    def allowed(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return f"a whole number from {self.low:,} to {self.high:,}"

    def check(self, value) -> int | str:
        """The value, or ConfigError naming this field and what it allows."""
        ok = value in self.choices if self.choices else (
            isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high)
        if not ok:
            raise ConfigError(self.name, f"{shown(value)} is not allowed: {self.label} must be {self.allowed}")
        return value

    def parse(self, text: str) -> int | str:
        """The value a query's text spells, checked."""
        text = text.strip()
        if self.choices:
            return self.check(text)
        if not WHOLE_NUMBER.fullmatch(text):
            raise ConfigError(self.name, f"{shown(text)} is not a whole number: {self.label} must be {self.allowed}")
        return self.check(int(text))


def _size(name: str, label: str, default: int, high: int, help: str, low: int = 1) -> Field:
    return Field(name, label, default, low, high, help)


def _depth(default: int) -> Field:
    return _size("depth", "depth", default, 16, "Linear layers (or conv layers), a ReLU between each two")


def _kernel(high: int) -> Field:
    return _size("kernel", "kernel", 3, high, "Kernel side, padded by half of it each side")


def _out(name: str, default: int) -> Field:
    return _size(name, name.replace("_", " "), default, 65_536, "Values out per row (classes, targets)")


COMMON = (_size("batch", "batch size", 64, 65_536, "Rows per call: the input's first dimension"),
          Field("mode", "mode", "inference", help="A forward (no_grad), or a training step (forward, backward, Adam)",
                choices=MODES))


# A model as data, built by _module and written out by _code: the same layers either way.

@dataclass(frozen=True)
class Layer:
    """A torch.nn class (or a wrapper here) by name, with its arguments (which may be Layers)."""
    kind: str
    args: tuple = ()
    options: tuple = ()  # (keyword, value) pairs


def _layer(kind: str, *args, **options) -> Layer:
    return Layer(kind, args, tuple(options.items()))


class LastStep(nn.Module):
    """A recurrent layer's output at the last step, into a head."""
    def __init__(self, rnn: nn.Module, head: nn.Module):
        super().__init__()
        self.rnn, self.head = rnn, head

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


class MeanPooled(nn.Module):
    """A body's output averaged over the sequence, into a head."""
    def __init__(self, body: nn.Module, head: nn.Module):
        super().__init__()
        self.body, self.head = body, head

    def forward(self, x):
        return self.head(self.body(x).mean(dim=1))


WRAPPERS = {cls.__name__: cls for cls in (LastStep, MeanPooled)}


def _mlp(first: int, depth: int, width: int, out: int) -> list[Layer]:
    widths = [first] + [width] * (depth - 1) + [out]
    layers = [item for i in range(depth) for item in (_layer("Linear", widths[i], widths[i + 1]), _layer("ReLU"))]
    return layers[:-1]


def _conv(dims: int, v: dict) -> Layer:
    conv, channels = f"Conv{dims}d", v["channels"]
    kernel, widths = v["kernel"], [v["in_channels"]] + [channels] * v["depth"]
    stack = [item for i in range(v["depth"])
             for item in (_layer(conv, widths[i], channels, kernel, padding=kernel // 2), _layer("ReLU"))]
    return _layer("Sequential", *stack, _layer(f"AdaptiveAvgPool{dims}d", 1), _layer("Flatten"),
                  _layer("Linear", channels, v["classes"]))


def _recurrent(v: dict) -> Layer:
    rnn = _layer(v["cell"], v["in_features"], v["hidden"], num_layers=v["layers"], batch_first=True)
    return _layer("LastStep", rnn, _layer("Linear", v["hidden"], v["out_features"]))


def _transformer(v: dict) -> Layer:
    layer = _layer("TransformerEncoderLayer", v["d_model"], v["heads"], dim_feedforward=v["feedforward"], dropout=0.0,
                   batch_first=True)
    return _layer("MeanPooled", _layer("Sequential", *[layer] * v["layers"]),
                  _layer("Linear", v["d_model"], v["out_features"]))


def _embedding(v: dict) -> Layer:
    bag = _layer("EmbeddingBag", v["vocabulary"], v["embedding_dim"], mode="mean")
    return _layer("Sequential", bag, *_mlp(v["embedding_dim"], v["depth"], v["width"], v["out_features"]))


@dataclass(frozen=True)
class Family:
    """A kind of model: its fields, its layers and its input's shape after the batch, from the fields' values."""
    name: str
    title: str
    fields: tuple[Field, ...]
    layers: Callable[[dict], Layer]
    shape: Callable[[dict], tuple[int, ...]]
    dtype: str = "float32"


HEADS = _size("heads", "heads", 4, 64, "Attention heads: they must divide d_model")
_CHANNELS = _size("channels", "channels", 16, 1024, "Channels of every conv layer")
FAMILIES = {family.name: family for family in (
    Family("mlp", "an MLP",
           (_depth(3), _size("width", "width", 64, 8192, "Units of each hidden layer"),
            _size("in_features", "in features", 16, 65_536, "Values in per row"), _out("out_features", 1)),
           lambda v: _layer("Sequential", *_mlp(v["in_features"], v["depth"], v["width"], v["out_features"])),
           lambda v: (v["in_features"],)),
    Family("conv1d", "a 1-D CNN",
           (_depth(2), _CHANNELS, _kernel(31), _size("length", "length", 128, 65_536, "Steps of each row"),
            _size("in_channels", "in channels", 1, 1024, "Channels in"), _out("classes", 10)),
           lambda v: _conv(1, v), lambda v: (v["in_channels"], v["length"])),
    Family("conv2d", "a 2-D CNN",
           (_depth(2), _CHANNELS, _kernel(15), _size("image_size", "image size", 32, 1024, "Side of each square image"),
            _size("in_channels", "in channels", 3, 64, "Channels in (3 for RGB)"), _out("classes", 10)),
           lambda v: _conv(2, v), lambda v: (v["in_channels"], v["image_size"], v["image_size"])),
    Family("recurrent", "a recurrent net (GRU or LSTM)",
           (Field("cell", "cell", "LSTM", help="The recurrent layer", choices=("GRU", "LSTM")),
            _size("layers", "layers", 1, 8, "Stacked recurrent layers"),
            _size("hidden", "hidden", 64, 4096, "Hidden units of each layer"),
            _size("sequence_length", "sequence length", 32, 4096, "Steps of each row; the last one goes to the head"),
            _size("in_features", "in features", 16, 4096, "Values in per step"), _out("out_features", 1)),
           _recurrent, lambda v: (v["sequence_length"], v["in_features"])),
    Family("transformer", "a transformer encoder",
           (_size("layers", "layers", 2, 16, "Encoder layers"),
            _size("d_model", "d_model", 64, 4096, "Width of each token's vector (the input's last dimension)"),
            HEADS,
            _size("feedforward", "feed-forward width", 128, 16_384, "Units of each layer's feed-forward block"),
            _size("sequence_length", "sequence length", 32, 4096, "Tokens of each row, mean-pooled into the head"),
            _out("out_features", 10)),
           _transformer, lambda v: (v["sequence_length"], v["d_model"])),
    Family("embedding", "an embedding bag and an MLP",
           (_size("vocabulary", "vocabulary", 5000, 1_000_000, "Distinct token ids", low=2),
            _size("embedding_dim", "embedding dim", 32, 1024, "Width of each token's embedding"),
            _size("tokens", "tokens per row", 20, 4096, "Token ids of each row, their embeddings averaged"),
            _depth(2), _size("width", "width", 64, 8192, "Units of each hidden layer"), _out("out_features", 4)),
           _embedding, lambda v: (v["tokens"],), "int64"),
)}
DEFAULT_FAMILY = "mlp"


@dataclass(frozen=True)
class Description:
    """A model as the form describes it; `describe` makes one whose values are checked."""
    family: str
    mode: str
    batch: int
    sizes: tuple[tuple[str, int | str], ...]  # the family's fields in its order

    @property
    def values(self) -> dict:
        return dict(self.sizes)

    @property
    def train(self) -> bool:
        return self.mode == "training"


def _family(name) -> Family:
    if name not in FAMILIES:
        raise ConfigError(FAMILY_KEY, f"{shown(name)} is not a family; the families are {', '.join(FAMILIES)}")
    return FAMILIES[name]


def describe(family: str, values: Mapping) -> Description:
    """The checked description of a `family` model; a field left out takes its default."""
    fields = {field.name: field for field in COMMON + _family(family).fields}
    for name in values:
        if name not in fields:
            raise ConfigError(name, f"not a field of the {family} family; its fields are {', '.join(fields)}")
    checked = {name: field.check(values.get(name, field.default)) for name, field in fields.items()}
    description = Description(family, checked.pop("mode"), checked.pop("batch"), tuple(checked.items()))
    _check_heads(checked)
    _check_input(description)
    return description


def _check_heads(values: dict) -> None:
    if "heads" in values and values["d_model"] % values["heads"]:
        divisors = [h for h in range(HEADS.low, HEADS.high + 1) if values["d_model"] % h == 0]
        raise ConfigError("heads", f"{values['heads']} does not divide d_model {values['d_model']}: heads must be "
                                   f"{HEADS.allowed} that divides d_model ({', '.join(map(str, divisors))})")


def _check_input(description: Description) -> None:
    given = input_of(description)
    elements = math.prod(given.shape)
    if elements > MAX_ELEMENTS:
        raise ConfigError("batch", f"the input {given.text} holds {elements:,} elements, over the "
                                   f"{MAX_ELEMENTS:,} a prediction takes: a smaller batch or smaller rows")


def to_query(description: Description) -> dict[str, str]:
    """The description as URL query parameters."""
    return {FAMILY_KEY: description.family, "mode": description.mode, "batch": str(description.batch),
            **{name: str(value) for name, value in description.sizes}}


def from_query(params: Mapping) -> Description:
    """The description URL query parameters hold (a list's last value counts; a field missing takes its default,
    a key that is no field of the family is another's and left alone)."""
    texts = {key: value[-1] if isinstance(value, (list, tuple)) else value
             for key, value in params.items() if value not in ([], ())}
    family = _family(texts.get(FAMILY_KEY, DEFAULT_FAMILY))
    return describe(family.name, {field.name: field.parse(texts[field.name])
                                  for field in COMMON + family.fields if field.name in texts})


def _module(value):
    if not isinstance(value, Layer):
        return value
    cls = WRAPPERS.get(value.kind) or getattr(nn, value.kind)
    return cls(*map(_module, value.args), **dict(value.options))


def build(description: Description) -> nn.Module:
    """The model, built from torch.nn."""
    return _module(FAMILIES[description.family].layers(description.values))


def input_of(description: Description) -> Input:
    """The input of one call: its shape, batch first, and element type."""
    family = FAMILIES[description.family]
    return Input((description.batch,) + family.shape(description.values), family.dtype)


def command(description: Description, filename: str = "your_model.py") -> str:
    """The CLI line that predicts the file `source` writes, saved as `filename`."""
    train = " --train" if description.train else ""
    return f"python -m core predict --model {filename}:build --input {input_of(description).text}{train}"


def _code(value, indent: int = 1) -> str:
    """A Layer as Python: a layer of layers one per line at `indent` levels of four spaces in."""
    if not isinstance(value, Layer):
        return repr(value)
    name = value.kind if value.kind in WRAPPERS else f"nn.{value.kind}"
    parts = [_code(arg, indent + 1) for arg in value.args] + [f"{key}={item!r}" for key, item in value.options]
    if not any(isinstance(arg, Layer) for arg in value.args):
        return f"{name}({', '.join(parts)})"
    pad = "    " * indent
    return f"{name}(\n" + "".join(f"{pad}    {part},\n" for part in parts) + f"{pad})"


def _wrappers(value) -> set[str]:
    if not isinstance(value, Layer):
        return set()
    return ({value.kind} & set(WRAPPERS)).union(*map(_wrappers, value.args))


def source(description: Description, filename: str = "your_model.py") -> str:
    """A self-contained Python file (it imports torch only) whose build() returns the same model."""
    family = FAMILIES[description.family]
    layers = family.layers(description.values)
    sizes = ", ".join(f"{name} {value}" for name, value in description.sizes)
    classes = "".join(f"\n\n{inspect.getsource(WRAPPERS[name])}" for name in sorted(_wrappers(layers)))
    return (f'"""Your model as Crossover\'s form describes it: {family.title}, batch {description.batch}, '
            f'{description.mode}.\n{sizes}.\n\nPredict it with:\n    {command(description, filename)}\n"""\n'
            f"from torch import nn\n{classes}\n\n"
            f"def build() -> nn.Module:\n    return {_code(layers)}\n")


def summary(description: Description) -> dict:
    """The model as torch prints it, and its parameter count (built on the meta device: nothing allocated)."""
    with torch.device("meta"):
        model = build(description)
    return {"text": str(model), "parameters": sum(p.numel() for p in model.parameters())}
