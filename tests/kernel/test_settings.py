"""The settings mechanism: defaults, construction by name, reading the
environment once, one-line errors, every section in the reference table."""

from __future__ import annotations

import pathlib

import pytest
from persona_service.cli import settings_sections
from persona_service.kernel import settings as config
from persona_service.kernel.settings import InvalidSetting, Settings, env_names, markdown_table, read
from persona_service.providers.pricing import DEFAULT_PRICES, Price, PriceTable
from persona_service.providers.settings import ProviderSettings
from persona_service.webhooks.settings import WebhookSettings


@pytest.fixture
def env(monkeypatch):
    """Sections read from exactly these environment variables."""
    for section in settings_sections():
        for name in env_names(section):
            monkeypatch.delenv(name, raising=False)

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


def test_kernel_defaults(env, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    s = read(Settings)
    assert s.data_dir == (tmp_path / ".persona").resolve()
    assert (s.database_url, s.redis_url, s.jwt_secret, s.secrets_key) == ("", "", "", "")
    assert (s.http_port, s.grpc_port) == (8080, 50051)
    assert (s.grpc_workers, s.server_processes, s.db_pool_size, s.auth_cache_seconds, s.jwt_ttl_seconds) == (4, 2, 16, 30, 3600)
    assert s.trusted_proxies == ("127.0.0.1/32", "::1/128")
    assert s.log_level == "INFO"


def test_environment_names_and_values(env):
    env(PERSONA_DATA_DIR="/tmp/p", DATABASE_URL="postgresql://db", REDIS_URL="redis://r", PERSONA_HTTP_PORT="81",
        PERSONA_GRPC_PORT="82", PERSONA_TRUSTED_PROXIES="10.0.0.0/8, 192.168.1.1", PERSONA_LOG_LEVEL="debug",
        PERSONA_GRPC_WORKERS="")  # empty: the default
    s = read(Settings)
    assert (s.data_dir, s.database_url, s.redis_url) == (pathlib.Path("/tmp/p"), "postgresql://db", "redis://r")
    assert (s.http_port, s.grpc_port, s.grpc_workers, s.log_level) == (81, 82, 4, "DEBUG")
    assert s.trusted_proxies == ("10.0.0.0/8", "192.168.1.1")


def test_keyword_construction_wins_over_the_environment(env, tmp_path):
    env(PERSONA_HTTP_PORT="81", DATABASE_URL="postgresql://env")
    s = Settings(data_dir=tmp_path, http_port=1234, database_url="postgresql://kw", grpc_port=4321)
    assert (s.data_dir, s.http_port, s.database_url, s.grpc_port) == (tmp_path, 1234, "postgresql://kw", 4321)
    assert Settings(data_dir=tmp_path, jwt_secret="s").resolved_jwt_secret() == "s"
    generated = Settings(data_dir=tmp_path).resolved_secrets_key()
    assert generated == Settings(data_dir=tmp_path).resolved_secrets_key() == (tmp_path / "secrets-key").read_text()


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("0", False), ("false", False), ("", False)])
def test_allow_private_keeps_its_values(env, value, expected):
    env(PERSONA_WEBHOOKS_ALLOW_PRIVATE=value)
    assert read(WebhookSettings).private_allowed is expected


@pytest.mark.parametrize(("mode", "value", "expected"), [
    ("development", None, True), ("production", None, False), ("development", "false", False),
])
def test_development_mode_allows_local_webhook_receivers(env, mode, value, expected):
    env(PERSONA_ENV=mode, **({"PERSONA_WEBHOOKS_ALLOW_PRIVATE": value} if value is not None else {}))
    config.forget()  # the kernel section is read again, with PERSONA_ENV
    try:
        assert read(WebhookSettings).private_allowed is expected
    finally:
        config.forget()


def test_webhook_defaults(env):
    s = read(WebhookSettings)
    assert (s.secret_max_age_seconds, s.secret_rotation_grace_seconds, s.lanes) == (90 * 86400, 604800, 4)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("PERSONA_HTTP_PORT", "abc", "invalid setting PERSONA_HTTP_PORT='abc': expected an integer"),
    ("PERSONA_HTTP_PORT", "0", "invalid setting PERSONA_HTTP_PORT='0': expected at least 1"),
    ("PERSONA_GRPC_PORT", "x", "invalid setting PERSONA_GRPC_PORT='x': expected an integer"),
    ("PERSONA_TRUSTED_PROXIES", "10.0.0.0/33", "invalid setting PERSONA_TRUSTED_PROXIES='10.0.0.0/33': "
                                               "'10.0.0.0/33' does not appear to be an IPv4 or IPv6 network"),
    ("PERSONA_LOG_LEVEL", "loud", "invalid setting PERSONA_LOG_LEVEL='loud': expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
])
def test_a_bad_value_is_one_line_naming_the_variable(env, name, value, message):
    env(**{name: value})
    with pytest.raises(InvalidSetting) as caught:
        read(Settings)
    assert str(caught.value) == message


def test_nested_json_errors_say_where(env):
    env(PERSONA_MODEL_PRICES='{"m": {"input": "cheap"}}')
    with pytest.raises(InvalidSetting, match=r"^invalid setting PERSONA_MODEL_PRICES='.*': m\.input: expected a number$"):
        read(ProviderSettings)
    env(PERSONA_MODEL_PRICES="[1]")
    with pytest.raises(InvalidSetting, match="expected a JSON object"):
        read(ProviderSettings)


def test_configured_prices_go_over_the_built_in_ones(env):
    env(PERSONA_MODEL_PRICES='{"gpt-x": {"input": 2, "output": 8}, "*": {"input": 1}}')
    table = PriceTable.from_env(read(ProviderSettings))
    assert table.price("gpt-x") == Price(2.0, 8.0)
    assert table.price("local-persona-1") == DEFAULT_PRICES["local-persona-1"]
    assert table.price("other") == Price(1.0, 0.0)
    assert PriceTable.from_env(ProviderSettings(model_prices={})).prices == DEFAULT_PRICES


def test_load_reads_a_section_once(env, monkeypatch):
    config.forget()
    try:
        env(PERSONA_WEBHOOK_LANES="3")
        first = config.load(WebhookSettings)
        monkeypatch.setenv("PERSONA_WEBHOOK_LANES", "5")
        assert config.load(WebhookSettings) is first and first.lanes == 3
    finally:
        config.forget()


def test_every_variable_is_documented_once():
    names = [name for section in settings_sections() for name in env_names(section)]
    assert len(names) == len(set(names))
    table = markdown_table(settings_sections())
    assert len(table.splitlines()) == len(names) + 2
    for section in settings_sections():
        for field, info in section.model_fields.items():
            assert info.description, f"{section.__name__}.{field} has no description"
