"""`make run`'s stand-in for SQS fair queues (docs/operations/worker.md "Fairness between
organizations"): which received messages the local queue poller hands the worker next.

On AWS every work message carries ``MessageGroupId = <organization id>`` (features/work/store.py
``send_messages``) and the standard queues are fair queues: while one group has a backlog, SQS
delivers the other groups' messages first, so a quiet organization's dwell time stays low. The
local moto server takes ``MessageGroupId`` on a standard queue and returns it with the message,
but delivers in arrival order; ``make run`` has one worker (Lambda runs many invocations at
once). So the local poller (localdev/pollers.py ``QueuePoller``) receives ahead into this
buffer, held per message group, and takes batches from it:

* **one group waiting**: up to ``batch`` (10, Lambda's batch size) of its messages, oldest first;
* **several groups waiting**: one message of each group, round-robin (the group served longest
  ago first), at most ``batch`` groups: one organization's share of the single local worker is
  capped at ``PER_GROUP_WHEN_SHARED`` message while another waits, so a quiet organization's
  message waits for at most one message of each busy one, not for their backlogs.

Bounded: at most ``max_held`` messages held (``MAX_HELD``; past it the rest stay in the queue, in
arrival order, and ``full`` says so); a message held for ``hold_seconds`` (half the queue's
visibility timeout) is due for a visibility extension (``due``), so a held message is never
delivered twice; a message received again (its visibility ran out meanwhile) replaces its older
copy. Messages the worker failed are not held again: they come back from the queue after its
visibility timeout, as on AWS.

Written here rather than taken from a library: it is a few lines of round-robin over dicts, and
no maintained package emulates SQS fair queues over a local queue.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_HELD = 1000               # messages the local poller holds ahead of the worker
PER_GROUP_WHEN_SHARED = 1     # one group's messages per batch while another group waits
NO_GROUP = ''                 # messages sent without a MessageGroupId form one group


def group_of(message: dict[str, Any]) -> str:
    """A received message's group (its ``MessageGroupId`` attribute), ``NO_GROUP`` without one."""
    return str((message.get('Attributes') or {}).get('MessageGroupId') or NO_GROUP)


class FairBuffer:
    """Received messages held per group, handed out round-robin (module docstring)."""

    def __init__(self, *, batch: int = 10, max_held: int = MAX_HELD, hold_seconds: float = 15.0,
                 clock: Callable[[], float]) -> None:
        self.batch = batch
        self.max_held = max_held
        self.hold_seconds = hold_seconds
        self.clock = clock
        # group -> {message id: (message, held since)}; the dict's order is the rotation: the
        # group served longest ago first
        self.groups: OrderedDict[str, OrderedDict[str, tuple[dict[str, Any], float]]] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(held) for held in self.groups.values())

    @property
    def room(self) -> int:
        return max(0, self.max_held - len(self))

    @property
    def full(self) -> bool:
        return self.room == 0

    def add(self, messages: list[dict[str, Any]]) -> None:
        """Hold received messages (a message already held, received again: its new copy)."""
        now = self.clock()
        for message in messages:
            for held in self.groups.values():
                held.pop(message['MessageId'], None)
            self.groups.setdefault(group_of(message), OrderedDict())[message['MessageId']] = (message, now)
        self._drop_empty()

    def take(self) -> list[dict[str, Any]]:
        """The next batch (module docstring), removed from the buffer."""
        waiting = [g for g, held in self.groups.items() if held]
        if not waiting:
            return []
        per_group = self.batch if len(waiting) == 1 else PER_GROUP_WHEN_SHARED
        out: list[dict[str, Any]] = []
        for group in waiting[:self.batch]:
            held = self.groups[group]
            for _ in range(min(per_group, len(held), self.batch - len(out))):
                out.append(held.popitem(last=False)[1][0])
            self.groups.move_to_end(group)   # served: the others come first next time
            if len(out) >= self.batch:
                break
        self._drop_empty()
        return out

    def due(self) -> list[dict[str, Any]]:
        """Held messages whose visibility needs extending now (held ``hold_seconds``); their
        clocks restart."""
        now = self.clock()
        out = []
        for held in self.groups.values():
            for mid, (message, since) in list(held.items()):
                if now - since >= self.hold_seconds:
                    out.append(message)
                    held[mid] = (message, now)
        return out

    def forget(self, message_ids: set[str]) -> None:
        """Stop holding messages (their visibility could not be extended: the queue has them back)."""
        for held in self.groups.values():
            for mid in message_ids:
                held.pop(mid, None)
        self._drop_empty()

    def _drop_empty(self) -> None:
        for group in [g for g, held in self.groups.items() if not held]:
            del self.groups[group]
