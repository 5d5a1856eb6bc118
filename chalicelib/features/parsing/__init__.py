"""Parsing: every uploaded document read into the family's document (docs/operations/parsing.md,
docs/api/documents.md "Parsed documents", docs/api/processing.md "The parse stage").

``readers/`` turns bytes into the node model of ``features/documents/deltas.py`` (``document`` ->
``page`` -> ``line`` -> ``word`` for PDFs and images, paragraphs/headings/tables for DOCX and
HTML, sheets -> rows -> cells for XLSX and CSV, paragraphs -> lines for plain text); it is a pure
library (no DynamoDB, no S3) with its own budgets (``readers.Limits``). ``service.py`` is the parse
stage the execution engine runs (features/work) and the parsed document served to clients and
steps; ``kddb.py`` the SDK's document file; ``render.py`` a page of the uploaded file drawn as a
PNG and ``pages.py`` the page images (cached in S3, handed out presigned) and a page's words
(docs/api/documents.md "Page images and words"); ``routes.py`` the routes.
"""
