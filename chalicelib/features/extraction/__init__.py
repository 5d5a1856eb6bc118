"""Extraction against data definitions: taxons with rules, typed data objects with provenance,
exceptions, and their review in tasks (docs/api/extraction.md)."""
