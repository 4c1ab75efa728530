"""`python -m core report -o FILE`: the single-file HTML report (core.report.single_file)."""
from core.params import file_path
from core.report import single_file


def register(sub) -> None:
    parser = sub.add_parser("report", help="write one self-contained HTML report that opens offline in any browser")
    parser.add_argument("-o", "--output", default="report.html", metavar="FILE", help="default: report.html")
    parser.set_defaults(command=run)


def run(args) -> int:
    print(single_file.write(file_path(args.output, "--output")).text())
    return 0
