"""The optional login: absent without an [auth] section, required with one, and a clear message where Authlib
is missing."""
import pytest
from streamlit.testing.v1 import AppTest

from core import settings
from ui import auth

AUTH = {"redirect_uri": "https://crossover.example.org/oauth2callback", "cookie_secret": "a-long-random-string",
        "client_id": "crossover", "client_secret": "secret",
        "server_metadata_url": "https://login.example.org/.well-known/openid-configuration"}


def app(secrets: dict | None = None, user: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(settings.APP_ROOT / "streamlit_app.py"), default_timeout=60)
    at.secrets.update(secrets or {})
    if user is not None:
        at.user = user
    return at.run()


@pytest.mark.full
def test_without_an_auth_section_the_app_opens_as_ever(results_dir):
    at = app()
    assert not at.exception and not at.error
    assert at.title[0].value == "Crossover" and not [b for b in at.button if b.label.startswith("Log")]


@pytest.fixture
def with_authlib(monkeypatch):
    monkeypatch.setattr(auth, "authlib_installed", lambda: True)


def test_with_an_auth_section_a_visitor_sees_the_login_and_nothing_else(results_dir, with_authlib):
    at = app({"auth": AUTH}, {"is_logged_in": False})
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in"]
    assert not at.get("page_link") and not at.dataframe  # no page of the report behind it


def test_each_named_provider_gets_its_button(results_dir, with_authlib):
    at = app({"auth": {"redirect_uri": AUTH["redirect_uri"], "cookie_secret": "x", "google": AUTH, "okta": AUTH}},
             {"is_logged_in": False})
    assert [b.label for b in at.button] == ["Log in with google", "Log in with okta"]


@pytest.mark.full
def test_a_logged_in_visitor_sees_the_report_and_can_log_out(results_dir, with_authlib):
    at = app({"auth": AUTH}, {"is_logged_in": True, "email": "ada@example.org"})
    assert not at.exception
    assert any(b.label == "Log out" for b in at.sidebar.button)
    assert "Logged in as ada@example.org" in [c.value for c in at.sidebar.caption]
    assert at.get("page_link")  # the overview's links to every experiment


def test_a_login_without_authlib_says_what_to_install(results_dir, monkeypatch):
    monkeypatch.setattr(auth, "authlib_installed", lambda: False)
    at = app({"auth": AUTH}, {"is_logged_in": False})
    assert not at.exception
    assert auth.INSTALL in at.error[0].value and not at.button
