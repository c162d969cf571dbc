"""Reading request bodies on the events service's Internet-facing routes, never past a cap.

Every route here that reads a body (a device registration, `/v1/log`, a Google callback) is
unauthenticated or authenticated only after the body has arrived, so a body is read with a
cap: refused at once when its Content-Length is over it, otherwise read only until one byte
past it. Nothing beyond the cap is ever held in memory; uvicorn discards the rest of a refused
body as it arrives (docs/wallet-callbacks.md#limits).
"""

from starlette.requests import Request

# More digits than any body we would read could have; int() of such a header is not needed.
_MAX_LENGTH_DIGITS = 18


async def bounded_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it is over `limit` bytes (the caller answers 413)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and (len(declared) > _MAX_LENGTH_DIGITS or int(declared) > limit):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)
