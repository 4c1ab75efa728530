"""Shared helpers for the app tests."""
from streamlit.testing.v1 import AppTest

from core import settings


def render(path: str) -> AppTest:
    """Run one script of the app (a page, or the router) once, as AppTest sees it."""
    return AppTest.from_file(str(settings.APP_ROOT / path), default_timeout=60).run()


def page_text(at: AppTest) -> str:
    """All the markdown a run drew, joined."""
    return " ".join(m.value for m in at.markdown)
