"""The events an outbox holds, read from its documents: one event per document, or the
`messages` of a batch document (shared/outbox.py `outbox_batch_documents`), in `_id` order."""

from pymongo.asynchronous.collection import AsyncCollection

from shared.mongo import Document


async def outbox_messages(documents: AsyncCollection[Document]) -> list[Document]:
    """Each event as `{_id, subject, payload}`, oldest document first, in order within one."""
    found: list[Document] = []
    async for doc in documents.find().sort("_id", 1):
        found.extend(doc.get("messages", [doc]))
    return found
