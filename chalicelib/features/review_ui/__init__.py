"""The reviewer's page (issue 49; docs/api/review-page.md): ``GET /review`` and its two static
assets, plain HTML, CSS and a small script served by the API itself (no framework, no build step,
no CDN). The page is a client of the REST API like any other: it reads tasks, data objects and
exceptions, the page images and words (features/parsing), and corrects values through
``PUT /api/data-objects/{id}/attributes/{attributeId}`` (features/extraction/review.py), so a
review in the browser closes exceptions, the task and the family through the one review path.

Where the rules live: the security headers (Content-Security-Policy and friends) in ``routes.py``;
what the page does in ``static/app.js`` (its module comment)."""
