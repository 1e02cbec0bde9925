"""Wake-ups across processes over Redis pub/sub: a runner that keeps a run's frames (or a model call's answer)
publishes its key; a server process's one subscriber thread wakes whoever waits on it here (a stream view, a
unary call waiting for the model). Waiters read Redis only when woken (or every `FALLBACK_SECONDS` while the
bus is down), never at a fixed poll interval: a frame reaches its view one round trip after it is kept.

The subscriber is subscribed only while something here waits: a process that once waited (a unary server
whose call waited for the model) is not woken by every frame of every run after it (issue 50).

A process also has an inbox of its own (`Wakeups.inbox`): what is sent there (`deliver`, a model call's answer)
wakes only this process's waiter on that key, and carries the value, so the waiter reads no Redis for it. The
sender keeps the value in Redis as well: a waiter whose delivery was lost (the bus away) reads it there."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable

import redis
from redis.client import Pipeline

from persona_service.kernel.logs import Throttled

log = logging.getLogger("persona_service.wakeups")
_warn = Throttled(log)

CHANNEL = "persona:kept"
# How long a waiter waits for a wake-up before it reads Redis anyway (a message lost while the bus reconnects).
FALLBACK_SECONDS = 0.5
_RETRY_SECONDS = 1.0


def deliver(pipe: Pipeline, inbox: str, key: str, value: str) -> Pipeline:
    """Add the wake-up of `key`'s waiter in the process whose inbox is `inbox`, with `value`, to a pipeline."""
    pipe.publish(inbox, f"{key}\n{value}")
    return pipe


def publish(pipe: Pipeline, keys: Iterable[str]) -> Pipeline:
    """Add the wake-up of `keys`' waiters (in every process) to a pipeline, after what it writes."""
    joined = " ".join(dict.fromkeys(keys))
    if joined:
        pipe.publish(CHANNEL, joined)
    return pipe


class Wakeups:
    """The keys this process's threads wait on, and the subscriber that wakes them (started on first use)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self.inbox = f"{CHANNEL}:{uuid.uuid4().hex}"  # this process's own channel (`deliver`)
        self._waiting: dict[str, set[threading.Event]] = {}
        self._delivered: dict[str, str] = {}  # values delivered to the inbox for keys waited on, until taken
        self._lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._subscribed = threading.Event()
        self._wanted = threading.Event()  # someone waits here: the listener subscribes (set by `watch`)

    def watch(self, key: str) -> threading.Event:
        """An event set whenever `key` is published (clear it before each read of what it names)."""
        event = threading.Event()
        with self._lock:
            self._waiting.setdefault(key, set()).add(event)
            self._wanted.set()
            if self._listener is None:
                self._listener = threading.Thread(target=self._listen, name="wakeups", daemon=True)
                self._listener.start()
        self._subscribed.wait(FALLBACK_SECONDS)  # a watcher after a quiet spell: until it is subscribed
        return event

    def delivered(self, key: str) -> str | None:
        """The value delivered to this process's inbox for `key` (once), if any has come."""
        with self._lock:
            return self._delivered.pop(key, None)

    def unwatch(self, key: str, event: threading.Event) -> None:
        with self._lock:
            events = self._waiting.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiting[key]
                    self._delivered.pop(key, None)
                if not self._waiting:
                    self._wanted.clear()

    def _wake(self, data: bytes | str) -> None:
        text = data.decode() if isinstance(data, bytes) else data
        with self._lock:
            events = [event for key in text.split() for event in self._waiting.get(key, ())]
        for event in events:
            event.set()

    def _receive(self, data: bytes | str) -> None:
        """A delivery to the inbox: kept for its key's waiter (dropped when none waits: it gave up)."""
        key, _, value = (data.decode() if isinstance(data, bytes) else data).partition("\n")
        with self._lock:
            events = list(self._waiting.get(key, ()))
            if events:
                self._delivered[key] = value
        for event in events:
            event.set()

    def _listen(self) -> None:
        while True:
            self._wanted.wait()  # nothing waits here: not subscribed, not woken by others' frames
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(CHANNEL, self.inbox)
                self._subscribed.set()
                self._wake_all()  # what was published while it was away
                while self._wanted.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] == "message":
                        inbox = message["channel"] in (self.inbox, self.inbox.encode())
                        (self._receive if inbox else self._wake)(message["data"])
                with self._lock:  # a watcher that came in between keeps the subscription
                    if not self._wanted.is_set():
                        self._subscribed.clear()
                        pubsub.unsubscribe(CHANNEL, self.inbox)
            except redis.RedisError as exc:
                self._subscribed.clear()
                _warn.warning("bus", "wake-ups unavailable (%s): waiters read Redis every %.1fs", exc,
                              FALLBACK_SECONDS)
                threading.Event().wait(_RETRY_SECONDS)
            finally:
                try:
                    pubsub.close()
                except redis.RedisError:
                    pass

    def _wake_all(self) -> None:
        with self._lock:
            events = [event for events in self._waiting.values() for event in events]
        for event in events:
            event.set()
