"""The holder-facing pages of a pass: the landing page, its downloads and the HTML error pages.

`responses.py` is what routes call: each function takes a pass and template already resolved
(by short_id for the permanent `/p/` URLs, by token for download links) and answers the page, the
.pkpass or the Google redirect, recording the pass event. The rest is split by concern:
`platform.py` (User-Agent), `view.py` (what the preview shows), `qr.py`, `render.py` (Jinja2),
`headers.py` (CSP and the other security headers).
"""
