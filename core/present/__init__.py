"""What results mean, for people: `analysis` (pairs, speedups, crossovers, claims and verdicts, plain pandas),
`prose` (measured figures in about.md), `tables`, `charts` (Altair: measured, published and predicted never alike)
and `presented` (an experiment with its page's verdicts, tables, charts and prose). May import: the ground modules,
core.store and core.measure; never streamlit."""
