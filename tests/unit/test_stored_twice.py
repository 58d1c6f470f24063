"""The rehearsal-host test's rule for messages stored twice (tests/cluster/ansible_deployed.py): a
resend accepted by a newly loaded topic puts its second copy in another ledger; two copies in one
ledger are deduplication not working, which the rule must still catch."""

from __future__ import annotations

import pyarrow as pa

from tests.cluster.ansible_deployed import stored_twice


def test_copies_in_two_ledgers_are_counted_and_copies_in_one_are_named() -> None:
    history = pa.table({
        "op": ["read", "read", "read", "read", "read", "send"],
        "producer": ["p", "p", "p", "p", "q", "p"],
        "seq": [1, 1, 2, 2, 1, 3],
        "message_id": ["(10,7,-1,-1)", "(12,0,-1,-1)", "(12,3,-1,-1)", "(12,4,-1,-1)", "(12,5,-1,-1)", None],
    })
    assert stored_twice(history) == (2, [("p", 2)])


def test_a_history_with_each_message_stored_once_has_none() -> None:
    history = pa.table({"op": ["read", "read"], "producer": ["p", "p"], "seq": [1, 2],
                        "message_id": ["(10,0,-1,-1)", "(10,1,-1,-1)"]})
    assert stored_twice(history) == (0, [])
