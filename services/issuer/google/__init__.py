"""Google Wallet: service-account identities, class/object resources, save links, REST client.

- `identity`: the service account (production key file or a generated development one).
- `objects`: template and pass -> Wallet class and object resources (pure functions).
- `savelink`: the signed "Add to Google Wallet" link (fat JWT, or skinny with ids only).
- `client`: the Wallet REST API (insert/patch classes and objects, object state).
- `passes`: what the issuer calls: `save_link`, `sync_pass`, `sync_template`, `void_pass`.

docs/google-wallet.md explains the mapping and the configuration.
"""
