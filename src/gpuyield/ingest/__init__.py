"""Ingest: read cluster records into the DuckDB store, one module per source.

Each source module has the same shape: a ``parse_*`` step that turns a file into typed rows in a staging
table (raising ``ParseError`` with file, line and field), and a ``load`` step that writes them into the
store inside the caller's transaction. ``slurm.ingest_slurm`` runs the Slurm sources as one atomic,
idempotent ingest.
"""
