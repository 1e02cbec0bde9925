"""Webhooks: the signature scheme (importable by receivers with only the
standard library) and, in `persona_service.webhooks.worker`, the delivery
worker.

Header: `X-Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, where
each `<hex>` is HMAC-SHA256 keyed with one valid endpoint secret (the whole
`whsec_…` string, UTF-8) over `<t>.<raw body>`. During a rotation grace there
is one `v1` per valid secret.
"""

from persona_service.webhooks.signing import SIGNATURE_HEADER, sign, signature_header, verify_signature

__all__ = ["SIGNATURE_HEADER", "sign", "signature_header", "verify_signature"]
