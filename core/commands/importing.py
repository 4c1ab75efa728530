"""`python -m core import FILE`: every member of a bundle checked, then merged (added, skipped or refused)."""
from core.params import file_path
from core.report import bundles


def register(sub) -> None:
    parser = sub.add_parser("import", help="check a bundle's every record and merge it into the results folder")
    parser.add_argument("bundle", metavar="FILE", help="a bundle written by `export` (or the Machines page)")
    parser.set_defaults(command=run)


def run(args) -> int:
    """Exit status 0 when every member was added or skipped, 1 when any was refused (2: not a bundle)."""
    imported = bundles.import_bundle(file_path(args.bundle, "bundle"))
    print(imported.text())
    return 1 if imported.refused else 0
