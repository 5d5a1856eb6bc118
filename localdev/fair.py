"""`make run`'s stand-in for SQS fair queues (docs/operations/worker.md "Fairness between
organizations"): which received messages the local queue poller hands the worker next.

On AWS every work message carries ``MessageGroupId = <organization id>`` (features/work/store.py
``send_messages``) and the standard queues are fair queues: while one group has a backlog, SQS
delivers the other groups' messages first, so a quiet organization's dwell time stays low. The
local moto server takes ``MessageGroupId`` on a standard queue and returns it with the message,
but delivers in arrival order, and ``make run`` had one worker where Lambda runs many
invocations at once. So the local poller (localdev/pollers.py ``QueuePoller``) receives ahead into this
buffer, held per message group, and takes batches from it:

* a batch is up to ``batch`` (10, Lambda's batch size) messages of ONE group, oldest first, from
  the group served longest ago (round-robin by batches);
* **the cap**: a group with a batch in flight (``in_flight``) gets no second one while it is
  (``MAX_IN_FLIGHT_PER_GROUP`` = 1), and `make run` runs ``FAIR_WORKERS`` = 2 in-process queue workers
  (localdev/pollers.py): one organization's burst holds one worker, the other serves every other
  organization at once. A quiet organization's message so waits for no batch of the busy one
  (a single-organization stack works as before: one batch at a time, in arrival order).

Bounded: at most ``max_held`` messages held (``MAX_HELD``; past it the rest stay in the queue, in
arrival order, and ``full`` says so). A message is received ahead hidden for the poller's
``HOLD_SECONDS`` (300 s, not the queue's visibility timeout: each receive counts toward the
dead-letter queue's maxReceiveCount, and a message held behind a busy group must not be received
again and again); one held for ``hold_seconds`` (a third of that) is due for a visibility
extension (``due``), so a held message is never delivered twice; a message received again (its
visibility ran out meanwhile) replaces its older copy. A batch handed to a worker gets the
queue's visibility timeout back: messages the worker failed are not held again, they come back
from the queue after its visibility timeout, as on AWS. A poller that stops gives what it holds
back to the queue at once (``QueuePoller.give_back``), so the next `make run` need not wait out
the hold.

Written here rather than taken from a library: it is a few lines of round-robin over dicts, and
no maintained package emulates SQS fair queues over a local queue.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_HELD = 1000               # messages the local poller holds ahead of the workers
MAX_IN_FLIGHT_PER_GROUP = 1   # batches of one group being worked at once (the cap)
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

    def take(self, in_flight: frozenset[str] | set[str] = frozenset()) -> tuple[str, list[dict[str, Any]]]:
        """The next batch (module docstring), removed from the buffer: (its group, its messages);
        none of a group in ``in_flight`` (the cap). ('', []) when nothing may go."""
        for group, held in self.groups.items():
            if not held or group in in_flight:
                continue
            out = [held.popitem(last=False)[1][0] for _ in range(min(self.batch, len(held)))]
            self.groups.move_to_end(group)   # served: the others come first next time
            self._drop_empty()
            return group, out
        return NO_GROUP, []

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
