"""Google Wallet: a template is a class, a pass an object of it (docs/google-wallet.md).

Pure mapping (`objects`, `savelink`) is kept apart from I/O (`client`), so the resources can be
checked against Google's schema without a network; `passes` is what the issuer calls.
"""
