"""What an experiment's page shows, beside what it measures (core.measure.experiment): its claims' verdicts,
its tables and charts, and its about.md with published and measured figures filled in. An experiment's class
derives from `Presented`; its package's `__init__.py` binds the parts that say what its results mean
(`EXPERIMENT.bind(analysis, charts, writeup)`), so no module looks another up by a name built at run time."""
import re
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd

from core import devices
from core.measure.experiment import Experiment
from core.params import PRESETS
from core.present import prose, tables
from core.present.analysis import evaluate
from core.published import figure_text

ABOUT_SECTIONS = ("Claim", "Measured", "Why", "Notes", "Source")  # Source: the write-up cited, for readers of the file
REQUIRED_SECTIONS = ABOUT_SECTIONS[:3]


class Presented(Experiment):
    """An experiment with what its page shows: `bind` gives it its package's analysis (CLAIMS, TABLES), its
    charts module (`charts(rows, published)`) and, where its write-up has timing figures, its writeup module
    (core.predict.writeups' REPLICAS and UNREPLICATED)."""
    _analysis: ModuleType | None = None
    _charts: ModuleType | None = None
    writeup: ModuleType | None = None

    def bind(self, analysis: ModuleType, charts: ModuleType, writeup: ModuleType | None = None) -> "Presented":
        self._analysis, self._charts, self.writeup = analysis, charts, writeup
        return self

    @property
    def claims(self) -> tuple:
        return tuple(self._analysis.CLAIMS) if self._analysis else ()

    def verdicts(self, rows: pd.DataFrame, published: pd.DataFrame, predicted: pd.DataFrame = None,
                 accuracy: str = "") -> list:
        """Each claim's verdict; where one needs a GPU, the predicted answer from `predicted` GPU rows."""
        return [evaluate(claim, rows, published, predicted, accuracy) for claim in self.claims]

    def table_makers(self) -> dict:
        """The package's TABLES: title -> a core.present.tables.Table (or any function of the rows frame)."""
        return self._analysis.TABLES if self._analysis else {}

    def tables(self, rows: pd.DataFrame, run_names: dict | None = None) -> dict[str, pd.DataFrame]:
        """Each table of TABLES for people (core.present.tables.readable: human headings, rounded figures, runs
        named by `run_names`)."""
        return {title: tables.for_people(make, rows, run_names) for title, make in self.table_makers().items()}

    def charts(self, rows: pd.DataFrame, published: pd.DataFrame) -> list:
        return self._charts.charts(rows, published) if self._charts else []

    def about(self, rows: pd.DataFrame | None = None) -> dict[str, str]:
        """The sections of about.md (Claim, Measured, Why, Notes, Source), published figures filled in, and measured
        ones from `rows` (this experiment's rows frame; without it every measured figure reads as not
        measured yet). A placeholder that can never be filled raises PlaceholderError."""
        folder = Path(sys.modules[type(self).__module__].__file__).parent
        return parse_about((folder / "about.md").read_text(encoding="utf-8"), rows, self)

    @property
    def claim(self) -> str:
        return self.about()["Claim"]


def parse_about(text: str, rows: pd.DataFrame | None = None, experiment: Experiment | None = None) -> dict[str, str]:
    """`## Section` blocks of an about.md, its placeholders filled:

    - `{published:ID}`: that figure of core/published.json, its value and unit ("11.29 s", "6x").
    - `{measured:FIELD|key=value|...}`: a figure of `rows` (core.present.prose), e.g.
      `{measured:census|variant=as written|device=cpu}` reads "38 operations, 38 kernels, 1 host sync and
      0 copies per epoch"; `{measured:share:host|device=cpu}` reads "62%". FIELD is a census count
      (`census_operations`, `census_kernels`, `census_syncs`, `census_copies`, `census_flops`, ...), `census`
      (all counts), `top` (most frequent operations), a breakdown part (`time_host_s`, ...), `median_s`,
      `share:PART` (PART: compute, copies, sync, loading, host) or a metric with a unit (`gb_per_s`,
      `first_epoch_s`, ...); keys pick rows by `variant`, `device` (cpu, cuda, mps, gpu or a name) and
      swept parameters (`batch_size=512`); `per=steps_per_epoch` states it per step. Figures are per unit
      (divided by a sample's `per_call`), from this machine when it measured them, else the machine that
      measured last; a line under the section says where they come from. Nothing measured yet reads
      "*not measured yet*", with the command that measures it.

    With `experiment`, every measured placeholder must match a point it plans (a known variant, device
    kind and parameter values), else PlaceholderError names it, whether or not `rows` are given."""
    text = re.sub(r"\{published:([^}]+)\}", lambda m: figure_text(m.group(1)), text)
    parts = re.split(r"^## +(.+?)\s*$", text, flags=re.M)
    sections = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2])}
    missing = [s for s in REQUIRED_SECTIONS if s not in sections]
    if missing:
        raise ValueError(f"about.md lacks the section(s) {', '.join(missing)}")
    points = prose.planned_points(experiment, PRESETS) if experiment and "{measured" in text else None
    here = devices.fingerprint()["machine_id"] if rows is not None and len(rows) else None
    name = experiment.name if experiment else None
    return {s: prose.fill(sections.get(s, ""), rows, name, points, here) for s in ABOUT_SECTIONS}
