"""`python -m core import FILE [FILE ...]`: every member of each bundle checked, then merged (added, skipped or
refused)."""
import sys

from core.params import file_path
from core.report import bundles

ERRORS = (bundles.BundleError,)


def register(sub) -> None:
    parser = sub.add_parser("import", help="check each bundle's every record and merge it into the results folder")
    parser.add_argument("bundles", nargs="+", metavar="FILE",
                        help="bundles written by `export`, `doctor` or the Machines page (doctor-*.tar.gz: all at once)")
    parser.set_defaults(command=run)


def run(args) -> int:
    """Exit status 0 when every member of every bundle was added or skipped, 1 when any was refused, 2 when a
    file was not a bundle (the others are imported all the same)."""
    status = 0
    for name in args.bundles:
        try:
            imported = bundles.import_bundle(file_path(name, "bundle"))
        except bundles.BundleError as e:
            if len(args.bundles) == 1:
                raise
            print(f"error: {name}: {e}", file=sys.stderr)
            status = 2
            continue
        print(imported.text() if len(args.bundles) == 1 else f"{name}: {imported.text()}")
        status = max(status, 1 if imported.refused else 0)
    return status
