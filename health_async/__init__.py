"""``health_async``: an asyncio-first client for the Health Records, ABHA registration and Profile service.

Start with :class:`HealthClient`; errors are in :mod:`health_async.errors`, models in
:mod:`health_async.models`, payload encryption in :mod:`health_async.jwe`, ABDM's health-data encryption in
:mod:`health_async.abdm_crypto`, a fake server for tests in :mod:`health_async.testing`, signed webhooks in
:mod:`health_async.webhooks`, resumable ingestion in :mod:`health_async.ingest`.

Layout (one concern, one place; private ``_modules`` are machinery, public ones are what users import)::

    health_async/
      __init__.py  errors.py  jwe.py  abdm_crypto.py  webhooks.py  cli.py   the public surface
      _client.py  _session.py  _auth.py  _retry.py  _limits.py  the transport: one request chokepoint
      _routes.py                     every path the client calls, in one place
      _wire.py                       wire declarations -> parsing: every tolerant rule, once per type
      _plain.py                      models -> plain data for output (CLI, ingest)
      _checks.py                     argument types, checked from each public method's annotations
      _aadhaar.py  _mobile.py  _abha_input.py   input rules, checked before anything is sent
      _seal.py                       sealed blobs (a flow's state in a cookie): AES-GCM, expiry
      models/      one module per domain: the attrs models, each field's wire name declared beside it
      resources/   one module per domain: its calls and their paths; a guided flow is a state machine beside
                   its resource (_abha_flow.py)
      _cli/        the command line, one module per domain
      ingest/      resumable ingestion: journal, input, engines (Ray's in _ray.py, imported only when asked for)
      testing/     the fake service, written from the vendor's files: it imports none of the client's routes,
                   models or parsing

Judgement call: the package is split by layer, with the wire rules beside their models, rather than by domain.
The domains share their models (an upload's result carries a processing result; ABDM's care contexts, consents
and profiles will meet in one webhook), and a layer split keeps each import one way: ``resources`` import
``models``, ``models`` import ``_wire``, and nothing imports back (``.ci/check_imports.py`` fails CI on any import
circle, including one dodged by an import inside a function). A new field touches its model's module and a test.
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
