"""The command line (`python -m core`): `cli` builds the parser from one module per command (info, listing, run,
cancel, calibrate, predict, export, importing, report), `progress` prints a run's lines and bar, and `jobs` runs a
command in the background for the app. May import: everything in core."""
