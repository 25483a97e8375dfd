"""The typed results of every operation: frozen, slotted attrs classes, one private module per domain.

Every model is built from the service's JSON by :mod:`health_async._wire`, from the wire names each field
declares: it ignores unknown keys, gives ``None`` (or an empty tuple) for a missing optional field, accepts the
live service's spellings beside the documented ones and raises
:class:`~health_async.errors.ResponseValidationError` for a body that does not fit.

Personal data (names, mobile numbers, e-mail, dates of birth, OTP hints, tokens, transaction ids) is left out
of every ``repr``.
"""

from ._abdm import *  # noqa: F403
from ._abdm import __all__ as _abdm_all
from ._abdm_events import *  # noqa: F403
from ._abdm_events import __all__ as _abdm_events_all
from ._abha import *  # noqa: F403
from ._abha import __all__ as _abha_all
from ._abha_kyc import *  # noqa: F403
from ._abha_kyc import __all__ as _abha_kyc_all
from ._abha_profile import *  # noqa: F403
from ._abha_profile import __all__ as _abha_profile_all
from ._consents import *  # noqa: F403
from ._consents import __all__ as _consents_all
from ._discover import *  # noqa: F403
from ._discover import __all__ as _discover_all
from ._documents import *  # noqa: F403
from ._documents import __all__ as _documents_all
from ._hiu import *  # noqa: F403
from ._hiu import __all__ as _hiu_all
from ._patients import *  # noqa: F403
from ._patients import __all__ as _patients_all
from ._processing import *  # noqa: F403
from ._processing import __all__ as _processing_all
from ._records import *  # noqa: F403
from ._records import __all__ as _records_all
from ._requests import *  # noqa: F403
from ._requests import __all__ as _requests_all
from ._scan_share import *  # noqa: F403
from ._scan_share import __all__ as _scan_share_all
from ._webhook_subscriptions import *  # noqa: F403
from ._webhook_subscriptions import __all__ as _webhook_subscriptions_all

__all__ = [
    *_documents_all,
    *_processing_all,
    *_records_all,
    *_abha_all,
    *_abha_profile_all,
    *_abha_kyc_all,
    *_scan_share_all,
    *_abdm_all,
    *_abdm_events_all,
    *_discover_all,
    *_consents_all,
    *_hiu_all,
    *_requests_all,
    *_patients_all,
    *_webhook_subscriptions_all,
]
