"""The two Ray actors of a cluster batch, both pinned to the driver's node (they live and die with
the run, not with a worker node).

`TeacherLimit` holds the permits of teacher.concurrency for one endpoint across every node, so the
endpoint sees at most that many calls at once however many nodes call it. A holder that is gone
cannot give its permit back, so a permit is a lease: it is dropped when its node is no longer alive
in the cluster (checked whenever someone waits), and, for a holder whose process died on a live
node, when it outlives its time to live (the teacher's own call timeout plus a margin: no live
call holds a permit that long). `RayLimiter` is the client side (arex.teacher.client.Limiter).

`ProgressBoard` collects what remote rollouts report (start, round ends) for the driver's live table.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import asynccontextmanager
from typing import AsyncIterator

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

LEASE_MARGIN_S = 60.0
"""A lease lives the teacher's call timeout plus this long."""


def pinned(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def alive_nodes() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}


@ray.remote(num_cpus=0, max_restarts=0)
class TeacherLimit:
    """`permits` calls at once, cluster-wide, for one endpoint (an async actor: waiting is cheap)."""

    def __init__(self, permits: int, ttl_s: float, check_s: float = 1.0):
        self.permits, self.ttl_s, self.check_s = permits, ttl_s, check_s
        self.leases: dict[str, tuple[str, float]] = {}  # lease id → (holder's node, expiry on our clock)
        self.waiting: set[str] = set()
        self.reaped = 0
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # made on the actor's own event loop
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self, lease: str, node: str) -> bool:
        """Wait for a permit; False if the lease was given up (released) while waiting."""
        cond = self._condition()
        async with cond:
            self.waiting.add(lease)
            try:
                while len(self.leases) >= self.permits and lease in self.waiting:
                    try:
                        await asyncio.wait_for(cond.wait(), self.check_s)
                    except asyncio.TimeoutError:
                        await self._reap()
                if lease not in self.waiting:
                    return False
                self.leases[lease] = (node, time.monotonic() + self.ttl_s)
                return True
            finally:
                self.waiting.discard(lease)

    async def release(self, lease: str) -> None:
        cond = self._condition()
        async with cond:
            self.leases.pop(lease, None)
            self.waiting.discard(lease)
            cond.notify_all()

    async def _reap(self) -> None:
        """Drop the leases of dead nodes and expired ones (called holding the condition)."""
        alive = await asyncio.to_thread(alive_nodes)
        now = time.monotonic()
        gone = [k for k, (node, expiry) in self.leases.items() if node not in alive or expiry < now]
        for k in gone:
            del self.leases[k]
        self.reaped += len(gone)

    async def state(self) -> dict:
        return {
            "permits": self.permits,
            "held": sorted(node for node, _ in self.leases.values()),
            "waiting": len(self.waiting),
            "reaped": self.reaped,
        }


class RayLimiter:
    """The client side of TeacherLimit (picklable: it travels to the rollout tasks)."""

    def __init__(self, actor, node: str):
        self.actor, self.node = actor, node

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        lease = uuid.uuid4().hex
        try:
            await self.actor.acquire.remote(lease, self.node)
            yield
        finally:  # also when cancelled while waiting: the actor forgets the lease either way
            self.actor.release.remote(lease)


def teacher_limit(base_url: str, permits: int, timeout_s: float, node: str):
    """The run's limiter actor for `base_url`, on the driver's node `node`."""
    name = f"arex-teacher-limit-{uuid.uuid4().hex[:8]}"  # one per run: its permits are this run's
    return TeacherLimit.options(name=name, scheduling_strategy=pinned(node)).remote(permits, timeout_s + LEASE_MARGIN_S)


@ray.remote(num_cpus=0, max_restarts=0)
class ProgressBoard:
    """Events from the rollout tasks, drained by the driver."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def note(self, event: dict) -> None:
        self.events.append(event)

    def drain(self) -> list[dict]:
        events, self.events = self.events, []
        return events
