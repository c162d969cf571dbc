"""Bodies are read with a cap: refused from Content-Length unread, or read to one byte past."""

from starlette.requests import Request
from starlette.types import Message

from services.events.bodies import bounded_body


class Upload:
    """An ASGI request whose body arrives in chunks; counts the chunks the app pulled."""

    def __init__(self, chunks: list[bytes], content_length: int | None = None):
        self.chunks = chunks
        self.pulled = 0
        headers = [] if content_length is None else [(b"content-length", b"%d" % content_length)]
        self.request = Request({"type": "http", "method": "POST", "headers": headers}, self.receive)

    async def receive(self) -> Message:
        chunk = self.chunks[self.pulled]
        self.pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": self.pulled < len(self.chunks)}


async def test_a_body_within_the_cap_is_read_whole() -> None:
    upload = Upload([b"ab", b"cd", b""], content_length=4)
    assert await bounded_body(upload.request, 4) == b"abcd"


async def test_a_declared_length_over_the_cap_is_refused_unread() -> None:
    upload = Upload([b"x" * 10], content_length=10)
    assert await bounded_body(upload.request, 9) is None
    assert upload.pulled == 0
    huge = Upload([b"x"], content_length=10**30)
    assert await bounded_body(huge.request, 9) is None


async def test_a_streamed_body_is_read_only_until_it_passes_the_cap() -> None:
    upload = Upload([b"x" * 4] * 1000)  # chunked: no Content-Length
    assert await bounded_body(upload.request, 10) is None
    assert upload.pulled == 3
    lying = Upload([b"x" * 4] * 1000, content_length=4)  # a Content-Length under the truth
    assert await bounded_body(lying.request, 10) is None
    assert lying.pulled == 3
