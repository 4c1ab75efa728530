"""The README is a front door that cannot drift: at most 160 lines, and its layout block names every package and
top-level folder the project has, and nothing it lacks."""
import re

from core import settings

README = settings.APP_ROOT / "README.md"
SKIPPED = {".git", ".venv", ".ci", ".streamlit", "__pycache__", ".pytest_cache"}


def layout() -> list[str]:
    block = re.search(r"<!-- layout:start -->(.*?)<!-- layout:end -->", README.read_text(encoding="utf-8"), re.S)
    return [line.split()[0] for line in block.group(1).splitlines() if line.strip() and not line.startswith("```")]


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 160


def test_every_path_the_layout_names_exists():
    assert [path for path in layout() if not (settings.APP_ROOT / path).exists()] == []


def test_every_package_and_top_level_folder_is_in_the_layout():
    root = settings.APP_ROOT
    folders = {f"{p.name}/" for p in root.iterdir() if p.is_dir() and p.name not in SKIPPED and not p.name.startswith(".")}
    packages = {f"{p.parent.relative_to(root)}/" for p in (root / "core").glob("*/__init__.py")}
    packages |= {f"{p.parent.relative_to(root)}/" for p in (root / "core").glob("*/*/__init__.py")
                 if p.parent.parent.name != "experiments"}
    assert sorted((folders | packages) - set(layout())) == []
