from services.issuer.app import create_app
from services.issuer.config import IssuerSettings
from shared.runner import serve

settings = IssuerSettings()
serve("issuer", create_app(settings), settings, settings.port)
