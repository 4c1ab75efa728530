"""Streamlit pieces shared by the pages: data loading, the page template, the rerun panel, sidebar."""
