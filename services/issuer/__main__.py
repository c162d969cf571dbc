from services.issuer.app import create_app
from services.issuer.config import IssuerSettings
from shared.runner import created_or_exit, serve

settings = IssuerSettings()
app = created_or_exit("issuer", lambda: create_app(settings), settings)
serve("issuer", app, settings, settings.port)
