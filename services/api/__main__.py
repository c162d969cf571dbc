from services.api.app import create_app
from services.api.config import ApiSettings
from shared.runner import serve

settings = ApiSettings()
serve("api", create_app(settings), settings, settings.port)
