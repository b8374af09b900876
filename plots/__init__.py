"""Seaborn figures from study result Datasets, with the closed forms drawn in (docs/results-schema.md)."""
