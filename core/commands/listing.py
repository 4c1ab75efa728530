"""`python -m core list [NAME]`: every experiment (or one), its parameters with what each allows and its value
in every preset, and its variants. Only the experiment named is imported."""
from core import experiments
from core.params import PRESETS, clip


def register(sub) -> None:
    parser = sub.add_parser("list", help="experiments, their parameters with each preset's values, and variants")
    parser.add_argument("experiment", nargs="?", help="only this experiment")
    parser.set_defaults(command=run)


def run(args) -> int:
    chosen = ([experiments.get(clip(args.experiment))] if args.experiment is not None
              else experiments.registry().values())
    print("\n\n".join(listing_text(exp) for exp in chosen))
    return 0


def listing_text(exp) -> str:
    """An experiment's parameters (what each allows and its value in every preset) and its variants."""
    configs = {preset: exp.config(preset) for preset in PRESETS}
    lines = [f"{exp.name}: {exp.title}", "  parameters (--set NAME=VALUE), with their value in each preset:"]
    for p in exp.all_params():
        shown_values = {preset: _show(p, config[p.name]) for preset, config in configs.items()}
        values = ("every preset: " + shown_values["quick"] if len(set(shown_values.values())) == 1
                  else "; ".join(f"{preset}: {value}" for preset, value in shown_values.items()))
        lines += [f"    {p.name}: {p.help} ({p.allowed()})", f"      {values}"]
    lines.append("  variants:")
    lines += [f"    '{v.name}' on {'/'.join(v.kinds)}: {v.help}" for v in exp.variants]
    return "\n".join(lines)


def _show(p, value) -> str:
    if p.many and p.choices and set(value) == set(p.choices):
        return "all"
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
