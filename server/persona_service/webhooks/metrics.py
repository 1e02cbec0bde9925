"""The webhooks module's Prometheus metrics (kernel.metrics sums them over
every process: the workers write beside the servers)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

DELIVERIES = Counter("persona_webhook_deliveries_total", "Delivery attempts, by outcome (succeeded, http_<status "
                     "class>, timeout, connection_error, destination_refused, internal_error)", ["outcome"])
DELIVERY_SECONDS = Histogram("persona_webhook_delivery_seconds", "Delivery attempts' latency (the receiver's)",
                             buckets=(.05, .1, .25, .5, 1, 2.5, 5, 10, 30))
QUEUE_DEPTH = Gauge("persona_webhook_queue_depth", "Deliveries waiting (pending), sampled every 15 s",
                    multiprocess_mode="mostrecent")


def outcome_of(status_code: int, error: str) -> str:
    if error:
        return error
    return "succeeded" if 200 <= status_code < 300 else f"http_{status_code // 100}xx"
