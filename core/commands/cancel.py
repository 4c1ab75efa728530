"""`python -m core cancel`: ask the run going on to stop after its current point, keeping the points it finished."""
import sys

from core.commands import jobs


def register(sub) -> None:
    parser = sub.add_parser("cancel", help="stop the run going on after its current point, keeping the points "
                                           "it finished (exit status 1 when no run is going on)")
    parser.set_defaults(command=run)


def run(args) -> int:
    try:
        stopped = jobs.cancel()
    except PermissionError:
        print("error: the run going on belongs to another user: it can only be cancelled as that user",
              file=sys.stderr)
        return 2
    if stopped is None:
        print("no run is going on")
        return 1
    print(f"cancelled run {stopped['run_id']} ({stopped['experiment']}, {stopped['preset']} preset, on "
          f"{', '.join(stopped['devices'])}): it stops after its current point; the {stopped['done']} of "
          f"{stopped['total'] or '?'} points it finished stay in {stopped['record']}")
    return 0
