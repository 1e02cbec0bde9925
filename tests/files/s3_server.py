"""A real S3-compatible server on 127.0.0.1 (moto in server mode) for the
object-storage tests, with one bucket made for them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
from moto.server import ThreadedMotoServer
from support import free_port

BUCKET = "persona-test"
CREDENTIALS = {"aws_access_key_id": "test-key", "aws_secret_access_key": "test-secret"}


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str = BUCKET

    def env(self) -> dict[str, str]:
        """The settings that point the service at it."""
        return {"PERSONA_STORAGE_BACKEND": "s3", "PERSONA_S3_BUCKET": self.bucket,
                "PERSONA_S3_ENDPOINT_URL": self.endpoint, "PERSONA_S3_REGION": "us-east-1",
                "PERSONA_S3_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
                "PERSONA_S3_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"]}

    def keys(self, prefix: str = "") -> list[str]:
        client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", **CREDENTIALS)
        listed = client.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return [item["Key"] for item in listed.get("Contents", ())]


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS).create_bucket(Bucket=BUCKET)
        yield S3Server(endpoint)
    finally:
        server.stop()
