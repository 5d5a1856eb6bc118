"""Documents: stores, uploads (S3 multipart), content, linked deltas, batch update, validation, the
SDK's store file API.
"""
