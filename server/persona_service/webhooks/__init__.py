"""Webhooks: endpoints, the signature deliveries carry and, in
`persona_service.webhooks.worker`, the delivery worker.

Header: `X-Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, where
each `<hex>` is HMAC-SHA256 keyed with one valid endpoint secret (the whole
`whsec_…` string, UTF-8) over `<t>.<raw body>`. During a rotation grace there
is one `v1` per valid secret. Receivers verify with the SDKs' helpers
(`persona_sdk.webhooks.verify`, `verifyWebhook` in TypeScript), which need no
server code.
"""

from persona_service.webhooks.signing import SIGNATURE_HEADER, sign, signature_header

__all__ = ["SIGNATURE_HEADER", "sign", "signature_header"]
