"""The holder-facing pages of a pass: the landing page, its downloads and the HTML error pages.

Routes call `responses` with a pass already resolved, however its URL family found it, so the
permanent and the expiring URLs cannot drift apart; docs/pages.md describes the pages.
"""
