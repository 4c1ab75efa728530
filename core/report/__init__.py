"""What the results folder says, to people and to other machines: the overview's verdict matrix and headline
(`overview`), the single-file HTML report (`single_file`), machines side by side (`compare`), the machines table
(`machines`) and results bundles (`bundles`, export and import). May import: everything in core but
core.commands."""
