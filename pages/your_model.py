import pandas as pd
import streamlit as st

from core import settings
from core.commands import jobs
from core.model import costmodel, hardware, profiles
from core.predict import families, ownmodel, uncertainty, yourmodel
from core.present import model_charts
from core.present.tables import seconds_text
from core.store.runlock import BusyError
from ui import model_form, predicted
from ui.router import require_router

require_router()

st.title("Will a GPU help your model?")
st.markdown("Describe a small model: Crossover builds it from `torch.nn` (nothing you type is run) and predicts "
            f"one call of it on {settings.this_host()}'s CPU and on the GPUs you pick, each driven by the CPU you "
            "pick, with the range the cost model's measured error gives each time. Every time on this page is "
            "**predicted** (dotted, hollow, its range shaded) unless it says **measured**.")


@st.cache_data(show_spinner="Taking the censuses (on PyTorch's meta device: nothing is computed)…", max_entries=32)
def _answered(described: families.Description, host: str, gpus: tuple[str, ...]):
    cpu = hardware.resolve(hardware.THIS)  # the CPU the reader has; the GPUs' host is theirs to pick
    targets = [hardware.resolve(name, host=host) for name in gpus]
    return (yourmodel.answer(described, cpu, targets), yourmodel.sweep(described, cpu, targets),
            {target.title: yourmodel.what_ifs(described, target) for target in targets})


def _the_model(described: families.Description) -> None:
    shown = families.summary(described)
    st.markdown(f"**The model built** ({shown['parameters']:,} parameters; input "
                f"`{families.input_of(described).text}`, one {'training step' if described.train else 'forward'} "
                f"a call):")
    st.code(shown["text"], language="text")
    st.download_button("Download it as a Python file", families.source(described), file_name="your_model.py",
                       mime="text/x-python", on_click="ignore", icon=":material/download:")
    st.caption("The command line takes over from here (on a machine of yours: it runs the file):")
    st.code(families.command(described), language="bash")


def _cpu_answer(found: yourmodel.Timed, described: families.Description) -> None:
    step, sample = st.columns(2)
    step.metric(f"{found.hardware}, per call (predicted)", seconds_text(found.seconds))
    sample.metric("per sample (predicted)", seconds_text(found.per_sample))
    st.caption(f"{found.regime}; {uncertainty.range_text(found.likely, found.seconds)} a call; "
               f"{costmodel.shares_text(found.parts, found.seconds)}.")
    timed = yourmodel.measured(described)
    if timed:
        ratio = timed["predicted_s"] / timed["measured_s"]
        st.markdown(f"**Measured on {settings.this_host()}'s CPU**: {seconds_text(timed['measured_s'])} a call (median of "
                    f"{timed['measured_blocks']} blocks of {timed['calls_per_block']} calls, IQR "
                    f"{seconds_text(timed['measured_iqr_s'])}, {timed['threads']} threads"
                    f"{'; noisy' if timed['measured_noisy'] else ''}): predicted / measured {ratio:.2f}.")
        if faults := ownmodel.faults_text(timed):
            st.caption(f"{faults[0].upper()}{faults[1:]}.")
    _measure_button(described, timed is not None)


def _measure_button(described: families.Description, done: bool) -> None:
    """Time the model on this machine's CPU as a background job; absent when read-only."""
    if settings.read_only():
        return
    job = jobs.current()
    if job is not None:
        st.caption("Timing your model now (its progress and a cancel are in the sidebar)." if
                   job["experiment"] == jobs.MODEL_CHECK else "A run is going on (see the sidebar): time it once it "
                                                              "ends.")
        return
    if profiles.load() is None:
        st.caption(f"To time it here beside its prediction, calibrate this machine first "
                   f"({profiles.CALIBRATION_TIME}, **Calibrate this machine** in the sidebar).")
        return
    if st.button("Time it again on this machine's CPU" if done else "Time it on this machine's CPU",
                 icon=":material/timer:", help="Builds the model for real and times one call with "
                                               "torch.utils.benchmark for about a second, in the background"):
        try:
            jobs.start_model_check(families.source(described), families.input_of(described).text, described.train,
                                   yourmodel.check_path(described))
        except (BusyError, settings.ReadOnlyError) as e:
            st.error(str(e))
        else:
            st.rerun()


def _gpu_answers(answer: yourmodel.Answer) -> None:
    rows = []
    for found in answer.gpus:
        memory = answer.memory[found.hardware]
        rows.append({"GPU (predicted)": found.hardware, "per call": seconds_text(found.seconds),
                     "per sample": seconds_text(found.per_sample),
                     "likely, a call": uncertainty.range_text(found.likely),
                     "regime": found.regime, "GPU idle": f"{found.gpu_idle / found.seconds:.0%}",
                     "verdict": uncertainty.speedup_text(answer.speedups[found.hardware]),
                     "fits its memory": "yes" if memory["fits"] else
                     f"no: needs {memory['needed_gib']:.3g} GiB of {memory['held_gib']:.3g}"})
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    above = [found for found in answer.gpus if uncertainty.erred(found.likely, found.seconds) == "fast"]
    if above:
        st.caption(f"{', '.join(found.hardware for found in above)}: the likely range lies wholly above the "
                   f"predicted time ({uncertainty.range_text(above[0].likely, above[0].seconds)}). The time is the "
                   f"model's figure; its error on such points says where the measurement likely falls.")
    for found in answer.gpus:
        verdict = answer.speedups[found.hardware]
        say = {uncertainty.HELPS: st.success, uncertainty.DOES_NOT: st.warning}.get(verdict["verdict"], st.info)
        say(f"**{found.hardware}**: {uncertainty.speedup_text(verdict)}.")


def _crossover(swept: pd.DataFrame, answer: yourmodel.Answer, described: families.Description) -> None:
    st.subheader("Where a GPU starts to win")
    crossing, fitting = yourmodel.crossovers(swept), yourmodel.largest_fitting(swept)
    marks = [{"batch": batch, "hardware": title, "what": f"{_short(title)} overtakes"}
             for title, batch in crossing.items() if batch]
    marks += [{"batch": batch, "hardware": title, "what": f"{_short(title)}'s memory ends"}
              for title, batch in fitting.items() if batch and batch < swept["batch"].max()]
    marks = [{"batch": batch, "hardware": ", ".join(m["hardware"] for m in marks if m["batch"] == batch),
              "what": "; ".join(m["what"] for m in marks if m["batch"] == batch)}
             for batch in dict.fromkeys(m["batch"] for m in marks)]  # one rule a batch, its labels joined
    timed = yourmodel.measured(described)
    measured = pd.DataFrame([{"batch": described.batch, "hardware": f"{settings.this_host()}'s CPU",
                              "per_sample_s": timed["measured_s"] / described.batch}] if timed else [],
                            columns=["batch", "hardware", "per_sample_s"])
    st.altair_chart(model_charts.crossover(swept, pd.DataFrame(marks, columns=["batch", "hardware", "what"]), measured,
                                           title="Time per sample against batch size (predicted)"), width="stretch")
    for title, batch in crossing.items():
        st.markdown(f"- **{title}**: " + (f"predicted faster than {answer.cpu.hardware} per sample from batch "
                                         f"{batch:,} on" if batch else
                                         f"not predicted faster than {answer.cpu.hardware} from any batch on, "
                                         "among those that fit")
                    + (f"; a batch past {fitting[title]:,} does not fit its memory." if fitting.get(title) and
                       fitting[title] < swept['batch'].max() else "."))
    st.caption("Where the lines cross is where the predicted times are equal; the shaded ranges say how far either "
               "may be off, so a crossing inside overlapping ranges is too close to call. Batches that do not fit a "
               "GPU's memory are left out of its line: what one call needs at the least (the weights, with their "
               "gradients and Adam's moments when training, or the largest tensor an operation takes); the "
               "activations a training step keeps for its backward come on top.")


def _short(title: str) -> str:
    """A GPU target's title without its host: 'T4'."""
    return title.split(" driven")[0]


def _where_it_goes(answer: yourmodel.Answer) -> None:
    st.subheader("Where the time goes on the GPU")
    rows = [{"hardware": found.hardware, "part": part, "seconds": seconds, "share": seconds / found.seconds}
            for found in answer.gpus for part, seconds in found.parts.items() if seconds > 0]
    st.altair_chart(model_charts.gpu_parts(pd.DataFrame(rows), title="One call's predicted parts"), width="stretch")
    st.caption("Host: Python and each operation's dispatch; launches: the CUDA launch calls; compute and copies: the "
               "GPU's work; sync: waiting for the GPU. " + " ".join(
                   f"{_short(found.hardware)} idles {found.gpu_idle / found.seconds:.0%} of the call."
                   for found in answer.gpus))


def _what_ifs(fixes: dict[str, list[yourmodel.WhatIf]]) -> None:
    st.subheader("What the fixes would change")
    title = st.selectbox("GPU", list(fixes), format_func=_short, key="ym-whatif-gpu")
    found = fixes[title]
    rows = [{"fix": w.name, "per_sample_us": w.timed.per_sample * 1e6,
             "low_us": w.timed.likely[0] / w.timed.batch * 1e6 if w.timed.likely else None,
             "high_us": w.timed.likely[1] / w.timed.batch * 1e6 if w.timed.likely else None}
            for w in found if w.timed is not None]
    st.altair_chart(model_charts.what_ifs(pd.DataFrame(rows), title=f"Per sample on {title} (predicted)"),
                    width="stretch")
    st.markdown(yourmodel.what_matters(found))
    st.caption("Each bar is predicted; its line is the range the model's measured error on such steps gives it (where "
               "the model has predicted such steps too fast, the range lies beyond the bar).")
    with st.expander("How each fix is modelled"):
        st.dataframe(pd.DataFrame([{"fix": w.name, "per sample (predicted)": seconds_text(w.timed.per_sample)
                                    if w.timed else "not predicted", "how it is modelled": w.how, "why not": w.why}
                                   for w in found]), hide_index=True,
                     column_config={"how it is modelled": st.column_config.TextColumn(width="large")})


described = model_form.description()
if described is None:
    st.stop()
_the_model(described)
st.header("The answer")
host, gpus = model_form.targets()
model_form.keep_in_url(described, host, gpus)
if stand_in := predicted.stand_in_text():
    st.info(stand_in)
answer, swept, fixes = _answered(described, host, tuple(gpus))
_cpu_answer(answer.cpu, described)
if not gpus:
    st.info("Pick a GPU to compare.")
    st.stop()
_gpu_answers(answer)
_crossover(swept, answer, described)
_where_it_goes(answer)
_what_ifs(fixes)
st.caption("This page's state is in its address: copy the link to share this model and answer.")
