"""Object storage settings (see `storage.open_storage`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from persona_service.kernel.api import Section


class FileSettings(Section):
    storage_backend: Literal["local", "s3"] = Field(
        "local",
        description="where objects (portrait images, exports) live: `local` (files under the data dir, served by "
                    "the service itself on HMAC-signed URLs) or `s3` (any S3-compatible object store, presigned URLs)",
    )
    storage_dir: str = Field("", description="`local` storage root; empty: `objects/` under the data dir")
    signed_url_ttl_seconds: int = Field(
        900, ge=1, le=7 * 24 * 3600, description="lifetime of the signed URLs the API hands out (15 minutes)",
    )
    public_url: str = Field(
        "",
        description="the base URL clients reach the edge at (e.g. `https://api.example.com`), for the `local` "
                    "backend's signed URLs and SCIM's `meta.location`; empty: "
                    "`http://<PERSONA_HTTP_HOST>:<PERSONA_HTTP_PORT>`",
    )
    s3_bucket: str = Field("", validate_default=True, description="`s3`: the bucket (required)")
    s3_region: str = Field("us-east-1", description="`s3`: the region")
    s3_endpoint_url: str = Field(
        "", description="`s3`: the endpoint of an S3-compatible store (MinIO, R2, …); empty: AWS",
    )
    s3_access_key_id: str = Field("", description="`s3`: access key id; empty: boto3's usual credential chain")
    s3_secret_access_key: str = Field("", description="`s3`: its secret")

    @field_validator("storage_backend", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("s3_bucket")
    @classmethod
    def _bucket(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("storage_backend") == "s3" and not value.strip():
            raise ValueError("required when PERSONA_STORAGE_BACKEND=s3")
        return value.strip()

    @field_validator("public_url", "s3_endpoint_url")
    @classmethod
    def _url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("expected an http(s) URL")
        return value
