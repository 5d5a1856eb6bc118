"""Documents are read: the parse stage, its readers (readers/), the parsed document served to
clients and steps (docs/api/documents.md, docs/api/processing.md)."""
