from services.events.app import create_app
from services.events.config import EventsSettings
from shared.runner import created_or_exit, serve

settings = EventsSettings()
app = created_or_exit("events", lambda: create_app(settings), settings)
serve("events", app, settings, settings.port)
