"""Parsing: every uploaded document read into the family's document (docs/operations/parsing.md).

``readers/`` turns bytes into the node model of ``features/documents/deltas.py`` (``document`` ->
``page`` -> ``line`` -> ``word`` for PDFs and images, paragraphs/headings/tables for DOCX and
HTML, sheets -> rows -> cells for XLSX and CSV, paragraphs -> lines for plain text); it is a pure
library (no DynamoDB, no S3) with its own budgets (``readers.Limits``). The parse stage that runs
it as an execution and stores the result lives beside it.
"""
