"""Altair chart builders: `common` holds the shared pieces, one module per experiment the rest."""
