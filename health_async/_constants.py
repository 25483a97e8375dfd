"""Names and default numbers, in one place: base URLs, header names, environment variables, limits."""

from __future__ import annotations

from typing import Final

PRODUCTION_URL: Final = "https://api.eka.care"
DEVELOPMENT_URL: Final = "https://api.dev.eka.care"

# headers
H_AUTHORIZATION: Final = "Authorization"
H_CLIENT_ID: Final = "client-id"
H_PT_ID: Final = "X-Pt-Id"
H_PARTNER_PT_ID: Final = "X-Partner-Pt-Id"
H_HIP_ID: Final = "X-Hip-Id"
H_ENCRYPTION: Final = "X-Encryption"
H_RETRY_AFTER: Final = "Retry-After"

# environment variables read by HealthClient.from_env() and the CLI
ENV_PREFIX: Final = "HEALTH_ASYNC_"
ENV_BASE_URL: Final = "HEALTH_ASYNC_BASE_URL"
ENV_TOKEN: Final = "HEALTH_ASYNC_TOKEN"
ENV_CLIENT_ID: Final = "HEALTH_ASYNC_CLIENT_ID"
ENV_CLIENT_SECRET: Final = "HEALTH_ASYNC_CLIENT_SECRET"
ENV_USER_ID: Final = "HEALTH_ASYNC_USER_ID"
ENV_ENCRYPTION_KEY: Final = "HEALTH_ASYNC_ENCRYPTION_KEY"
ENV_KEY_ID: Final = "HEALTH_ASYNC_KEY_ID"
ENV_LOG: Final = "HEALTH_ASYNC_LOG"
ENV_PROXY: Final = "HEALTH_ASYNC_PROXY"
ENV_TRUST_ENV: Final = "HEALTH_ASYNC_TRUST_ENV"

# defaults
DEFAULT_TIMEOUT: Final = 30.0
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
DEFAULT_MAX_CONNECTIONS: Final = 100
DEFAULT_MAX_UPLOAD_SIZE: Final = 10 * 1024 * 1024  # the live service's direct-upload limit per file
DEFAULT_MAX_RESPONSE_SIZE: Final = 32 * 1024 * 1024
DEFAULT_RETRY_ATTEMPTS: Final = 4
DEFAULT_RETRY_BASE_DELAY: Final = 0.5
DEFAULT_RETRY_MAX_DELAY: Final = 8.0
DEFAULT_RETRY_AFTER_CAP: Final = 60.0
TOKEN_REFRESH_MARGIN: Final = 60.0  # refresh a client-credentials token this many seconds before it expires
