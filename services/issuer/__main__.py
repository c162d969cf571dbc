import logging
import sys

from services.issuer.app import create_app
from services.issuer.config import IssuerSettings
from shared.apple_certificates import SigningIdentityError
from shared.logs import configure_logging
from shared.runner import STARTUP_FAILURE, serve

settings = IssuerSettings()
try:
    app = create_app(settings)
except SigningIdentityError as exc:
    # A configuration mistake, not a bug: one line that names it, no traceback.
    configure_logging("issuer", settings.log_level, settings.replica)
    logging.getLogger("services.issuer").critical("cannot start: %s", exc)
    sys.exit(STARTUP_FAILURE)
serve("issuer", app, settings, settings.port)
