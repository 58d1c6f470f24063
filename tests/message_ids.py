"""Message ids as the history writes them: ``(ledger,entry,partition,batch)``."""

from __future__ import annotations

from pulsarlab.history.schema import message_position


def ledger_entry(message_id: str) -> tuple[int, int]:
    """``(ledger, entry)`` of a history's message id (an error if it is none)."""
    position = message_position(message_id)
    if position is None:
        raise ValueError(f"not a message id: {message_id!r}")
    return position
