"""JSON log lines carrying the request id; nothing secret is ever passed to a logger."""

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "request_id", default=None
)
account_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "account_id", default=None
)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str, replica: str | None = None):
        super().__init__()
        self._service = service
        self._replica = replica

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": self._service,
            **({"replica": self._replica} if self._replica else {}),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if (request_id := request_id_var.get()) is not None:
            line["request_id"] = request_id
        if (account_id := account_id_var.get()) is not None:
            line["account_id"] = account_id
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure_logging(service: str, level: str, replica: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service, replica))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    # uvicorn's access log would print query strings; our own middleware logs requests instead.
    logging.getLogger("uvicorn.access").disabled = True
