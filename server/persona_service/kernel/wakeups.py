"""Wake-ups across processes over Redis pub/sub: a runner that keeps a run's frames publishes the run's id on
that run's own channel (`publish`: `persona:kept:<key>`); a server process's one subscriber thread is
subscribed to the channels of the keys something in it waits on (a stream view's run), and wakes whoever waits
here. Waiters read Redis only when woken (or every `FALLBACK_SECONDS` while the bus is down), never at a fixed
poll interval: a frame reaches its view one round trip after it is kept.

A process is subscribed to a key's channel only while something in it waits on that key (issue 50): a unary
server is never woken by the frames of runs it does not serve, and a stream server only by those of its views.
Before, every frame of every run went on one shared channel, and every process waiting on anything was woken by
all of them (36-38 ms/s of CPU under three organizations' streams).

A process also has an inbox of its own (`Wakeups.inbox`, subscribed from its first wait on): what is sent there
(`deliver`, a model call's answer) wakes only this process's waiter on that key, and carries the value, so the
waiter reads no Redis for it. The sender keeps the value in Redis as well: a waiter whose delivery was lost (the
bus away) reads it there. `persona_wakeups_total` counts the messages a process's subscriber got, by whether
something there waited for them."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

import redis
from redis.client import Pipeline, PubSub

from persona_service.kernel.logs import Throttled
from persona_service.kernel.metrics import WAKEUPS

log = logging.getLogger("persona_service.wakeups")
_warn = Throttled(log)

CHANNEL = "persona:kept"  # the prefix of every wake-up channel: a key's (`key_channel`), a process's inbox
# How long a waiter waits for a wake-up before it reads Redis anyway (a message lost while the bus reconnects).
FALLBACK_SECONDS = 0.5
_RETRY_SECONDS = 1.0
_WAITED = WAKEUPS.labels(waited="yes")
_UNWAITED = WAKEUPS.labels(waited="no")


def key_channel(key: str) -> str:
    """The channel `key`'s wake-ups are published on: only processes waiting on `key` subscribe to it."""
    return f"{CHANNEL}:{key}"


def deliver(pipe: Pipeline, inbox: str, key: str, value: str) -> Pipeline:
    """Add the wake-up of `key`'s waiter in the process whose inbox is `inbox`, with `value`, to a pipeline."""
    pipe.publish(inbox, f"{key}\n{value}")
    return pipe


def publish(pipe: Pipeline, keys: Iterable[str]) -> Pipeline:
    """Add the wake-up of `keys`' waiters (in whichever processes wait on them) to a pipeline, after what it
    writes: one message on each key's own channel."""
    for key in dict.fromkeys(keys):
        pipe.publish(key_channel(key), key)
    return pipe


@dataclass
class _Subscribing:
    """A channel's SUBSCRIBEs sent and not yet confirmed: its watcher waits until they are."""

    sent: int = 0
    done: threading.Event = field(default_factory=threading.Event)


class Wakeups:
    """The keys this process's threads wait on, and the subscriber that wakes them (started on first use)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self.inbox = f"{CHANNEL}:{uuid.uuid4().hex}"  # this process's own channel (`deliver`)
        self._waiting: dict[str, set[threading.Event]] = {}
        self._listening: dict[str, set[threading.Event]] = {}  # those of `_waiting` subscribed to the key's channel
        self._delivered: dict[str, str] = {}  # values delivered to the inbox for keys waited on, until taken
        self._subscribing: dict[str, _Subscribing] = {}
        self._lock = threading.Lock()
        self._pubsub: PubSub | None = None  # the listener's connection while it is up
        self._listener: threading.Thread | None = None

    def watch(self, key: str) -> threading.Event:
        """An event set whenever `key` is published (clear it before each read of what it names)."""
        return self._watch(key, listen=True)

    def watch_inbox(self, key: str) -> threading.Event:
        """An event set when a value for `key` is delivered to this process's inbox (`deliver`, then
        `delivered`): no channel of the key's is subscribed to."""
        return self._watch(key, listen=False)

    def delivered(self, key: str) -> str | None:
        """The value delivered to this process's inbox for `key` (once), if any has come."""
        with self._lock:
            return self._delivered.pop(key, None)

    def unwatch(self, key: str, event: threading.Event) -> None:
        with self._lock:
            events = self._waiting.get(key)
            if events is None or event not in events:
                return
            events.discard(event)
            if not events:
                del self._waiting[key]
                self._delivered.pop(key, None)
            listeners = self._listening.get(key)
            if listeners is not None and event in listeners:
                listeners.discard(event)
                if not listeners:
                    del self._listening[key]
                    self._send(key_channel(key), subscribe=False)

    def _watch(self, key: str, listen: bool) -> threading.Event:
        event = threading.Event()
        channel = key_channel(key) if listen else self.inbox
        with self._lock:
            self._waiting.setdefault(key, set()).add(event)
            self._start()
            if listen:
                listeners = self._listening.setdefault(key, set())
                listeners.add(event)
                if len(listeners) == 1:
                    self._subscribing.setdefault(channel, _Subscribing()).sent += 1
                    self._send(channel, subscribe=True)
            pending = self._subscribing.get(channel)
        if pending is not None:  # nothing published from now on is missed once it is confirmed
            pending.done.wait(FALLBACK_SECONDS)
        return event

    def _start(self) -> None:
        """Start the listener (under the lock): it subscribes to the inbox and every key waited on so far."""
        if self._listener is None:
            self._subscribing.setdefault(self.inbox, _Subscribing()).sent += 1
            self._listener = threading.Thread(target=self._listen, name="wakeups", daemon=True)
            self._listener.start()

    def _send(self, channel: str, subscribe: bool) -> None:
        """SUBSCRIBE or UNSUBSCRIBE on the listener's connection (under the lock: in the order of the changes
        here); while it is down, the listener subscribes to what is waited on when it is back."""
        if self._pubsub is None:
            return
        try:
            (self._pubsub.subscribe if subscribe else self._pubsub.unsubscribe)(channel)
        except redis.RedisError as exc:  # the listener sees its connection fail and comes back
            _warn.warning("bus", "wake-ups: (un)subscribing %s failed (%s)", channel, exc)

    def _confirmed(self, channel: str) -> None:
        with self._lock:
            pending = self._subscribing.get(channel)
            if pending is not None:
                pending.sent -= 1
                if pending.sent <= 0:
                    del self._subscribing[channel]
                    pending.done.set()

    def _wake(self, key: str) -> None:
        with self._lock:
            events = list(self._waiting.get(key, ()))
        (_WAITED if events else _UNWAITED).inc()
        for event in events:
            event.set()

    def _receive(self, data: str) -> None:
        """A delivery to the inbox: kept for its key's waiter (dropped when none waits: it gave up)."""
        key, _, value = data.partition("\n")
        with self._lock:
            events = list(self._waiting.get(key, ()))
            if events:
                self._delivered[key] = value
        (_WAITED if events else _UNWAITED).inc()
        for event in events:
            event.set()

    def _listen(self) -> None:
        while True:
            pubsub: PubSub = self.redis.pubsub()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            try:
                self._connect(pubsub)
                self._wake_all()  # what was published while it was away
                while True:
                    self._handle(self._next(pubsub))
            except redis.RedisError as exc:
                _warn.warning("bus", "wake-ups unavailable (%s): waiters read Redis every %.1fs", exc,
                              FALLBACK_SECONDS)
            finally:
                with self._lock:
                    self._pubsub = None
                _close(pubsub)
            with self._lock:
                if not self._waiting:  # nobody waits here: the next watcher starts a listener again
                    self._listener = None
                    return
            threading.Event().wait(_RETRY_SECONDS)

    def _connect(self, pubsub: PubSub) -> None:
        """Subscribe to the inbox and to the channel of every key waited on now."""
        with self._lock:
            channels = [self.inbox, *(key_channel(key) for key in self._listening)]
            for channel in channels:  # one SUBSCRIBE for all: one confirmation each
                self._subscribing.setdefault(channel, _Subscribing()).sent = 1
            pubsub.subscribe(*channels)
            self._pubsub = pubsub

    def _next(self, pubsub: PubSub) -> dict[str, object] | None:
        """The next message (blocking): read without the lock, then taken in under it, so that redis-py's
        record of the subscriptions never changes under a (un)subscribe of a watcher's thread."""
        # redis-py leaves both unannotated: a response is whatever its parser read, a message a dict (or None).
        response: object = pubsub.parse_response(block=True)  # type: ignore[no-untyped-call]
        with self._lock:
            return pubsub.handle_message(response)  # type: ignore[no-untyped-call,no-any-return]

    def _handle(self, message: dict[str, object] | None) -> None:
        if message is None:
            return
        channel = _text(message["channel"])
        if message["type"] == "subscribe":
            self._confirmed(channel)
        elif message["type"] == "message":
            data = _text(message["data"])
            (self._receive if channel == self.inbox else self._wake)(data)

    def _wake_all(self) -> None:
        with self._lock:
            events = [event for events in self._waiting.values() for event in events]
        for event in events:
            event.set()


def _close(pubsub: PubSub) -> None:
    try:
        pubsub.close()
    except redis.RedisError:
        pass


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
