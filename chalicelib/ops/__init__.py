"""Operator tools run by hand (``python -m chalicelib.ops.<tool>``), never on a request path:
they may read the whole table (Scan), which no request does."""
