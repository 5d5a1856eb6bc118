"""Every limit a client can meet, defined once (issue 23): the code that enforces a limit and
the documents that state it (the OpenAPI document, the MCP tools' input schemas, error
messages) import it from here. Small and import-free: routes load it at cold start.

What each limit means for a client, and which status it answers: docs/api/limits.md and
docs/api/conventions.md. Per-deployment limits a stage may change (rate limits, upload and
bridge sizes) are read by core/config.py, which takes its defaults from here.
"""
from __future__ import annotations

# --------------------------------------------------------------------------- lists (pages)
DEFAULT_PAGE_SIZE = 10           # pageSize when none is given (REST)
MAX_PAGE_SIZE = 100              # pageSize at most (REST and MCP)
MAX_PAGE = 1_000_000             # page number at most
MCP_DEFAULT_PAGE_SIZE = 20       # an MCP tool's page when the agent gives none

# --------------------------------------------------------------------------- bodies and bytes
MAX_JSON_BODY_BYTES = 350_000    # a JSON request body (DynamoDB items stop at 400 KB)
SMALL_UPLOAD_MAX_BYTES = 5 * 2 ** 20   # a document uploaded in one request (SMALL_UPLOAD_MAX_BYTES)
OUTBOUND_MAX_BYTES = 5 * 2 ** 20       # an answer read through the egress fence (BRIDGE_PROXY_MAX_BYTES)

# --------------------------------------------------------------------------- batches and sizes
MAX_UI_EVENTS = 100              # UI events in one POST (one transaction of 100 items with the counter)
MAX_UI_EVENT_KIND = 128          # characters of a UI event's kind
MAX_BATCH_FAMILIES = 100         # document families in one batch update
MAX_PART_NUMBER = 10_000         # S3: parts of a multipart upload, numbered 1..10,000
MAX_PARTS_PER_URL_REQUEST = 1_000   # presigned part URLs per request (~0.7 MB: under Lambda's 6 MB answer)
MIN_PART_SIZE = 5 * 2 ** 20      # S3: every part of a multipart upload but the last
MAX_PART_SIZE = 5 * 2 ** 30      # S3: any part
MAX_OPEN_UPLOAD_SESSIONS = 20    # open upload sessions per document store and user (docs/api/lifecycle.md)
MAX_DOCUMENT_PATH = 1024         # characters of a document's path in its store
MAX_REQUEST_ID = 200             # characters of an activity start's idempotency key
MAX_API_KEYS_PER_USER = 50        # live API keys one user holds (a new one past that: 409)
# page images and words (features/parsing/pages.py, render.py; docs/api/documents.md "Page images and words")
PAGE_IMAGE_MIN_DPI = 36          # dpi a client may ask a page image at: at least
PAGE_IMAGE_MAX_DPI = 300         # ... and at most (past either: 400)
PAGE_IMAGE_DEFAULT_DPI = 150
# the dpi a page image is drawn (and cached) at: the asked dpi rounded up to the next step, so a page
# holds at most this many cached images whatever dpi clients ask (each of 36..300 did before)
PAGE_IMAGE_DPI_STEPS = (36, 72, 100, 150, 200, 300)
PAGE_IMAGE_MAX_PIXELS = 25_000_000   # pixels of one page image: the dpi used is lowered to fit
PAGE_IMAGE_MAX_SIDE = 8_000      # pixels of one side of a page image: the dpi used is lowered to fit
PAGE_IMAGE_URL_SECONDS = 300     # lifetime of a page image's presigned URL
MAX_PAGE_WORDS = 20_000          # words of one page's answer (past it: truncated)
MCP_MAX_ARRAY_ITEMS = 100        # items of an MCP tool's array argument unless its schema says otherwise
