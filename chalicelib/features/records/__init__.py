"""Families served by the generic rules alone (kernel/crud.py): their declarations (declarations.py)."""
