"""Crossover's core: plain Python (no Streamlit) for devices, timing, experiments and results."""
