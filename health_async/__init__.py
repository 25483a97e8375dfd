"""``health_async``: an asyncio-first client for the Health Records, ABHA registration and Profile service.

Start with :class:`HealthClient`; errors are in :mod:`health_async.errors`, models in
:mod:`health_async.models`, payload encryption in :mod:`health_async.jwe`, ABDM's health-data encryption in
:mod:`health_async.abdm_crypto`, a fake server for tests in :mod:`health_async.testing`, signed webhooks in
:mod:`health_async.webhooks`, resumable ingestion in :mod:`health_async.ingest`.

Layout (one concern, one place; private ``_modules`` are machinery, public ones are what users import)::

    health_async/
      __init__.py  errors.py  jwe.py  abdm_crypto.py  cli.py          the public surface
      _client.py  _session.py  _auth.py  _retry.py  _limits.py  the transport: one request chokepoint
      _routes.py  _wire.py  _plain.py  _checks.py  ...             one room per concern
      models/  resources/  testing/  _cli/   one package per domain in each: records, patients, abha, abdm,
                                             webhooks (the same names in every layer)
      webhooks/    verify, parse and receive webhooks (aiohttp and ASGI)
      ingest/      resumable ingestion: journal, input, engines (Ray's in _ray.py, imported only when asked for)

Layers only point down: the order is declared once (``LAYERS`` in ``.ci/check_imports.py``) and CI checks every
import against it, those inside functions and under ``TYPE_CHECKING`` included; a domain's package is found under
the same name in every layer. ``ARCHITECTURE.md`` (at the repository's root) tells the rest: every package in a
line, the path of one call and of one webhook, and a checklist for adding an endpoint.
"""

from ._auth import ClientCredentials, TokenProvider
from ._bulk import BulkStream
from ._client import HealthClient
from ._config import NOT_GIVEN, NotGiven
from ._constants import DEVELOPMENT_URL, PRODUCTION_URL
from ._limits import SharedLimiter
from ._retry import RetryPolicy
from ._version import __version__
from .errors import (
    AbhaBlocked,
    AbhaError,
    AbhaRateLimited,
    AbhaSessionExpired,
    AccountLikelyCreated,
    ApiError,
    AuthenticationError,
    BundleInvalid,
    ClientClosedError,
    ClientLoopError,
    DocumentNotFound,
    EncryptionError,
    FileTooLarge,
    FlowStateExpired,
    FlowStateInvalid,
    HealthError,
    InvalidAadhaarNumber,
    InvalidAbhaAddress,
    InvalidArgumentType,
    InvalidFlowStep,
    InvalidMobileNumber,
    InvalidOtp,
    InvalidRequest,
    NotFoundError,
    OtpMismatch,
    OutcomeUnknown,
    PaginationError,
    ProcessingFailed,
    ProcessingTimeout,
    ProfileNotFound,
    RateLimitError,
    RequestTimeout,
    ResendTooSoon,
    ResponseTooLarge,
    ResponseValidationError,
    ServerError,
    TLSVerificationError,
    TransportError,
    UploadFailed,
    WebhookSignatureError,
)
from .models import (
    AadhaarInit,
    AbhaAccount,
    AbhaProfile,
    AbhaStep,
    Case,
    CasePage,
    Coordinate,
    Document,
    DocumentListItem,
    DocumentPage,
    ExtractedTest,
    FileEntry,
    FileType,
    FlowStep,
    LoginMethod,
    LoginMethods,
    NewAbhaProfile,
    OtpSent,
    Patient,
    PatientCreated,
    PatientPage,
    ProcessingError,
    ProcessingResult,
    ProcessingStatus,
    Profile,
    ReportItem,
    ResultFlag,
    SkipState,
    SmartReport,
    UploadResult,
)
from .resources import AadhaarRegistration, AbhaLogin, MobileRegistration
from .resources.records._polling import PollPolicy

__all__ = [
    "DEVELOPMENT_URL",
    "NOT_GIVEN",
    "PRODUCTION_URL",
    "AadhaarInit",
    "AadhaarRegistration",
    "AbhaAccount",
    "AbhaBlocked",
    "AbhaError",
    "AbhaLogin",
    "AbhaProfile",
    "AbhaRateLimited",
    "AbhaStep",
    "AccountLikelyCreated",
    "ApiError",
    "AbhaSessionExpired",
    "AuthenticationError",
    "BulkStream",
    "BundleInvalid",
    "Case",
    "CasePage",
    "ClientClosedError",
    "ClientLoopError",
    "ClientCredentials",
    "Coordinate",
    "Document",
    "DocumentListItem",
    "DocumentNotFound",
    "DocumentPage",
    "EncryptionError",
    "ExtractedTest",
    "FileEntry",
    "FileTooLarge",
    "FlowStateExpired",
    "FlowStateInvalid",
    "FileType",
    "FlowStep",
    "HealthClient",
    "HealthError",
    "InvalidAadhaarNumber",
    "InvalidAbhaAddress",
    "InvalidArgumentType",
    "InvalidFlowStep",
    "InvalidMobileNumber",
    "InvalidOtp",
    "InvalidRequest",
    "LoginMethod",
    "LoginMethods",
    "MobileRegistration",
    "NewAbhaProfile",
    "NotFoundError",
    "NotGiven",
    "OtpMismatch",
    "OtpSent",
    "OutcomeUnknown",
    "PaginationError",
    "Patient",
    "PatientCreated",
    "PatientPage",
    "PollPolicy",
    "ProcessingError",
    "ProcessingFailed",
    "ProcessingResult",
    "ProcessingStatus",
    "ProcessingTimeout",
    "Profile",
    "ProfileNotFound",
    "RateLimitError",
    "ReportItem",
    "RequestTimeout",
    "ResendTooSoon",
    "ResponseTooLarge",
    "ResponseValidationError",
    "ResultFlag",
    "RetryPolicy",
    "ServerError",
    "SharedLimiter",
    "SkipState",
    "SmartReport",
    "TLSVerificationError",
    "TokenProvider",
    "TransportError",
    "UploadFailed",
    "UploadResult",
    "WebhookSignatureError",
    "__version__",
]

# Tracebacks read health_async.DocumentNotFound, not health_async.errors.DocumentNotFound. Only exceptions:
# renaming the module of an attrs class would break the resolution of its annotations (cattrs needs them).
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and issubclass(_obj, BaseException) and _obj.__module__.startswith("health_async."):
        _obj.__module__ = "health_async"
del _name, _obj
