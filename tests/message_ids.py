"""Message ids as the history writes them: ``(ledger,entry,partition,batch)``."""

from __future__ import annotations


def ledger_entry(message_id: str) -> tuple[int, int]:
    """``(ledger, entry)`` of a history's message id."""
    ledger, entry, *_ = (int(x) for x in message_id.strip("()").split(","))
    return ledger, entry
