"""The batch's slot: where the search writes the input it is about to try (inside the sandbox and on the host;
stdlib only).

A batch that dies on an input (``os._exit``, a signal, the memory limit) is started again without that input,
so the host must know which input was running. The search used to say so with a ``try`` event on its channel
before every run: a pipe write per run, about 140 a function, each one waking the host's reader. A fork
server's batch now gets a *slot* with its pipes (:mod:`calib.executors.sandbox.forkserver`): a
:data:`SLOT_BYTES` ``memfd`` the host made and sealed at that size. Before each run the search overwrites
its start with the input's key (:meth:`Slot.write`: one ``pwrite``, no reader to wake), and the host reads
it once the batch has ended (:func:`key`). A key too long for it goes on the channel as a ``try`` event, as
before, and the slot then says so (:data:`ON_CHANNEL`). Without a fork server (a sandbox per batch, no
sandbox) there is no slot and every key is a ``try`` event.

The slot is the batch's to write, like its channel: code under test that finds the descriptor can write
another key there, as it can forge a ``try`` event (docs/executors.md, *What a batch can forge*). The host
only uses the key to leave that input out when it starts the batch again.
"""

from __future__ import annotations

import os

#: The slot's size: a 4-byte length, then the key in UTF-8.
SLOT_BYTES = 1 << 16
#: The length written when the key went on the channel instead (too long for the slot).
ON_CHANNEL = 0xFFFFFFFF

_pwrite = os.pwrite  # bound now: code under test that replaces os.pwrite does not reach the slot


class Slot:
    """The harness's end: the slot's descriptor (among the harness's own, above the code's)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, key: str) -> bool:
        """Put ``key`` in the slot; False if it does not fit (the caller then sends a ``try`` event)."""
        data = key.encode("utf-8", "surrogatepass")
        try:
            if len(data) > SLOT_BYTES - 4:
                _pwrite(self.fd, ON_CHANNEL.to_bytes(4, "little"), 0)
                return False
            _pwrite(self.fd, len(data).to_bytes(4, "little") + data, 0)
        except OSError:  # the code closed or replaced the descriptor: the channel, as without a slot
            return False
        return True


def key(slot: bytes) -> str | None:
    """The key a batch's slot holds when it ended; None when it holds none (nothing tried, the key went on the
    channel, or it is not a key: the host then goes by the channel's ``try`` events)."""
    if len(slot) < 4:
        return None
    size = int.from_bytes(slot[:4], "little")
    if size == 0 or size > len(slot) - 4:
        return None
    try:
        return slot[4:4 + size].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
