"""Runs one service's app under uvicorn: `python -m services.<name>`."""

import uvicorn
from fastapi import FastAPI

from shared.logs import configure_logging


def serve(service: str, app: FastAPI, host: str, port: int, log_level: str) -> None:
    configure_logging(service, log_level)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, lifespan="on")
