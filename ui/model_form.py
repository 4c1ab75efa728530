"""The Your model page's form: a model described by family and sizes (core.predict.families), the CPU that drives the
GPUs and the GPUs to compare, kept in the page's URL so that a link reproduces the same model and answer."""
import streamlit as st

from core import settings
from core.model import hardware
from core.params import ConfigError
from core.predict import families
from ui import predicted

PREFIX = "ym-"
HOST, GPUS = "host", "gpus"  # the URL's keys beside the description's
LOADED = PREFIX + "loaded"  # session state: the URL was read into the widgets
MOST_GPUS = 4


def _key(name: str, family: str | None = None) -> str:
    return f"{PREFIX}{family}-{name}" if family else f"{PREFIX}{name}"


def host_choices() -> dict[str, str]:
    """The CPUs that can drive the GPUs: this machine's (or the CPU standing in for it), then the catalogue's."""
    cpus = {hardware.THIS: f"{settings.this_host()}'s CPU"}
    cpus |= {row["name"]: row["title"] for row in hardware.listing() if row["kind"] == "cpu" and
             row["origin"] == "catalogue"}
    return cpus


def gpu_choices() -> dict[str, str]:
    return {row["name"]: row["title"] for row in predicted.gpu_choices()}


def _load_url() -> None:
    """The URL's description, host and GPUs into the widgets, once a session; a bad value is said, naming its field,
    and the defaults stand in."""
    if st.session_state.get(LOADED):
        return
    st.session_state[LOADED] = True
    query = st.query_params.to_dict()
    try:
        described = families.from_query(query)
    except ConfigError as e:
        st.session_state[_key("url-error")] = f"The link's model could not be read, so the defaults stand in: {e}"
        described = families.from_query({})
    st.session_state[_key("family")] = described.family
    st.session_state[_key("mode")] = described.mode
    st.session_state[_key("batch")] = described.batch
    for name, value in described.sizes:
        st.session_state[_key(name, described.family)] = value
    if query.get(HOST) in host_choices():
        st.session_state[_key(HOST)] = query[HOST]
    gpus = [name for name in query.get(GPUS, "").split(",") if name in gpu_choices()]
    if gpus:
        st.session_state[_key(GPUS)] = gpus[:MOST_GPUS]


def description() -> families.Description | None:
    """The model the form describes, None (with the error shown, naming the field and its range) when a value is
    out of bounds."""
    _load_url()
    if error := st.session_state.pop(_key("url-error"), None):
        st.warning(error)
    names = list(families.FAMILIES)
    family = st.selectbox("Family", names, key=_key("family"), format_func=lambda n: families.FAMILIES[n].title)
    mode = st.radio("What one call is", families.MODES, key=_key("mode"), horizontal=True,
                    format_func=lambda m: "inference (a forward, no_grad)" if m == "inference" else
                    "a training step (forward, backward, Adam)")
    values = {"mode": mode, "batch": _number(families.COMMON[0], _key("batch"))}
    fields = families.FAMILIES[family].fields
    for column, field in zip(st.columns(3) * len(fields), fields):
        with column:
            values[field.name] = _widget(field, _key(field.name, family))
    try:
        return families.describe(family, values)
    except ConfigError as e:
        st.error(f"{e}. Change it to predict.")
        return None


def _widget(field: families.Field, key: str):
    if field.choices:
        st.session_state.setdefault(key, field.default)
        return st.selectbox(field.label, field.choices, key=key, help=field.help)
    return _number(field, key)


def _number(field: families.Field, key: str) -> int:
    """A whole number, bounds said in its help and checked by families.describe (its message names them)."""
    st.session_state.setdefault(key, field.default)
    return st.number_input(f"{field.label} ({field.low:,} to {field.high:,})", step=1, key=key,
                           help=f"{field.help}: {field.allowed}")


def targets() -> tuple[str, list[str]]:
    """The CPU that drives the GPUs and the GPUs picked (catalogue names)."""
    hosts, gpus = host_choices(), gpu_choices()
    st.session_state.setdefault(_key(HOST), hardware.THIS)
    host = st.selectbox("CPU driving the GPUs", list(hosts), key=_key(HOST), format_func=hosts.get,
                        help=f"The host of the GPU box you are thinking of; each GPU is compared with "
                             f"{settings.this_host()}'s CPU")
    default = [name for name in (predicted.chosen_gpu(), "h100-sxm") if name in gpus]
    st.session_state.setdefault(_key(GPUS), list(dict.fromkeys(default)))
    picked = st.multiselect("GPUs to compare", list(gpus), key=_key(GPUS), format_func=gpus.get,
                            max_selections=MOST_GPUS, help=f"At most {MOST_GPUS}, from the catalogue (and "
                                                           f"{settings.this_host()}'s calibrated GPUs)")
    return host, picked


def keep_in_url(described: families.Description, host: str, gpus: list[str]) -> None:
    """The page's state as its URL's query: a link to it reproduces the same model and answer."""
    wanted = families.to_query(described) | {HOST: host, GPUS: ",".join(gpus)}
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)
