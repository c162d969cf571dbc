from services.webhooks.app import create_app
from services.webhooks.config import WebhooksSettings
from shared.runner import serve

settings = WebhooksSettings()
serve("webhooks", create_app(settings), settings, settings.port)
