"""``health_async``: an asyncio-first client for the Health Records, ABHA registration and Profile service.

Start with :class:`HealthClient`; errors are in :mod:`health_async.errors`, models in
:mod:`health_async.models`, payload encryption in :mod:`health_async.jwe`, a fake server for tests in
:mod:`health_async.testing`.
"""

from ._auth import ClientCredentials, TokenProvider
from ._client import HealthClient
from ._config import NOT_GIVEN, NotGiven
from ._constants import DEVELOPMENT_URL, PRODUCTION_URL
from ._retry import RetryPolicy
from ._version import __version__
from .errors import (
    AbhaError,
    ApiError,
    AuthenticationError,
    ClientClosedError,
    DocumentNotFound,
    EncryptionError,
    FileTooLarge,
    HealthError,
    InvalidAadhaarNumber,
    InvalidRequest,
    NotFoundError,
    ProfileNotFound,
    RateLimitError,
    RequestTimeout,
    ResponseTooLarge,
    ResponseValidationError,
    ServerError,
    TLSVerificationError,
    TransportError,
)
from .models import (
    AadhaarInit,
    Coordinate,
    Document,
    DocumentListItem,
    DocumentPage,
    FileEntry,
    FileType,
    Profile,
    ReportItem,
    ResultFlag,
    SmartReport,
    UploadResult,
)

__all__ = [
    "DEVELOPMENT_URL",
    "NOT_GIVEN",
    "PRODUCTION_URL",
    "AadhaarInit",
    "AbhaError",
    "ApiError",
    "AuthenticationError",
    "ClientClosedError",
    "ClientCredentials",
    "Coordinate",
    "Document",
    "DocumentListItem",
    "DocumentNotFound",
    "DocumentPage",
    "EncryptionError",
    "FileEntry",
    "FileTooLarge",
    "FileType",
    "HealthClient",
    "HealthError",
    "InvalidAadhaarNumber",
    "InvalidRequest",
    "NotFoundError",
    "NotGiven",
    "Profile",
    "ProfileNotFound",
    "RateLimitError",
    "ReportItem",
    "RequestTimeout",
    "ResponseTooLarge",
    "ResponseValidationError",
    "ResultFlag",
    "RetryPolicy",
    "ServerError",
    "SmartReport",
    "TLSVerificationError",
    "TokenProvider",
    "TransportError",
    "UploadResult",
    "__version__",
]

# Tracebacks read health_async.DocumentNotFound, not health_async.errors.DocumentNotFound. Only exceptions:
# renaming the module of an attrs class would break the resolution of its annotations (cattrs needs them).
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and issubclass(_obj, BaseException) and _obj.__module__.startswith("health_async."):
        _obj.__module__ = "health_async"
del _name, _obj
