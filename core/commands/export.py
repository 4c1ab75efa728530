"""`python -m core export -o FILE`: records and their machines' calibrated profiles in one bundle."""
from core.params import file_path
from core.report import bundles

ERRORS = (bundles.BundleError,)


def register(sub) -> None:
    parser = sub.add_parser("export", help="write records (and their machines' calibrated profiles) into one bundle "
                                           "to carry to another Crossover")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the bundle to write (.tar.gz)")
    parser.add_argument("--machine", action="append", metavar="ID", help="only this machine's records (repeatable; "
                                                                          "ids: `python -m core info`, the Machines page)")
    parser.add_argument("--experiment", action="append", metavar="NAME", help="only this experiment (repeatable)")
    parser.set_defaults(command=run)


def run(args) -> int:
    file_path(args.output, "--output")
    exported = bundles.export(args.output, args.machine, args.experiment)
    print(exported.text(args.output))
    return 0
