from services.events.app import create_app
from services.events.config import EventsSettings
from shared.runner import serve

settings = EventsSettings()
serve("events", create_app(settings), settings, settings.port)
