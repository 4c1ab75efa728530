"""The optional login: Streamlit's built-in OIDC login (`st.login`), on only where the server's
.streamlit/secrets.toml has an `[auth]` section (README: "Team server"). Off by default and never required:
without that section the app opens to anyone who can reach it, as a local page should."""
import importlib.util
from collections.abc import Mapping

import streamlit as st

INSTALL = "pip install Authlib"


def configured() -> Mapping | None:
    """The `[auth]` section of the secrets, or None (no secrets file, or no such section: never an error)."""
    if not st.secrets.load_if_toml_exists():
        return None
    section = st.secrets.get("auth")
    return section or None


def authlib_installed() -> bool:
    return importlib.util.find_spec("authlib") is not None


def providers(section: Mapping) -> list[str | None]:
    """The providers to offer: each named `[auth.NAME]` table, or the one provider of `[auth]` itself (None)."""
    named = [name for name, value in section.items() if isinstance(value, Mapping)]
    return named or [None]


def require_login() -> None:
    """Where a login is configured, a visitor who has not logged in sees the login and nothing else, and one who
    has gets a log-out button in the sidebar; elsewhere, nothing."""
    section = configured()
    if section is None:
        return
    if not authlib_installed():
        st.error(f"This server's secrets.toml asks for a login ([auth]), but Authlib, which Streamlit's login needs, "
                 f"is not installed: run `{INSTALL}` on the server and restart it.", icon=":material/lock:")
        st.stop()
    if not st.user.is_logged_in:
        st.title("Crossover")
        st.markdown("This Crossover is shared with a team: log in to see it.")
        for provider in providers(section):
            st.button(f"Log in{f' with {provider}' if provider else ''}", on_click=st.login, args=(provider,),
                      icon=":material/login:", key=f"crossover-login-{provider}")
        st.stop()
    with st.sidebar:
        st.caption(f"Logged in as {st.user.get('email') or st.user.get('name') or 'you'}")
        st.button("Log out", on_click=st.logout, icon=":material/logout:")
