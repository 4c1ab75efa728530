"""Records on disk, the lowest floor above the ground modules (devices, settings, params, versions): one JSON
record per run and what keeps it whole. `files` (atomic writes, safe reads, a full disk in words), `results` (the
record writer, the loader and the rows frame), `record_schema`, `runlock` (one run at a time per machine) and `runs`
(which runs a page shows). May import: the ground modules only."""
