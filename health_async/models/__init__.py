"""The typed results of every operation: frozen, slotted attrs classes, one package per domain (``records``,
``patients``, ``abha``, ``abdm``, ``registries``, ``webhooks``), one private module per concern inside it.

Every model is built from the service's JSON by :mod:`health_async._wire`, from the wire names each field
declares: it ignores unknown keys, gives ``None`` (or an empty tuple) for a missing optional field, accepts the
live service's spellings beside the documented ones and raises
:class:`~health_async.errors.ResponseValidationError` for a body that does not fit.

Personal data (names, mobile numbers, e-mail, dates of birth, OTP hints, tokens, transaction ids) is left out
of every ``repr``.
"""

from .abdm._consents import *  # noqa: F403
from .abdm._consents import __all__ as _abdm_consents_all
from .abdm._discover import *  # noqa: F403
from .abdm._discover import __all__ as _abdm_discover_all
from .abdm._events import *  # noqa: F403
from .abdm._events import __all__ as _abdm_events_all
from .abdm._hiu import *  # noqa: F403
from .abdm._hiu import __all__ as _abdm_hiu_all
from .abdm._hospital import *  # noqa: F403
from .abdm._hospital import __all__ as _abdm_hospital_all
from .abdm._requests import *  # noqa: F403
from .abdm._requests import __all__ as _abdm_requests_all
from .abdm._user_linking import *  # noqa: F403
from .abdm._user_linking import __all__ as _abdm_user_linking_all
from .abha._kyc import *  # noqa: F403
from .abha._kyc import __all__ as _abha_kyc_all
from .abha._profile import *  # noqa: F403
from .abha._profile import __all__ as _abha_profile_all
from .abha._registration import *  # noqa: F403
from .abha._registration import __all__ as _abha_registration_all
from .abha._scan_share import *  # noqa: F403
from .abha._scan_share import __all__ as _abha_scan_share_all
from .patients._patients import *  # noqa: F403
from .patients._patients import __all__ as _patients_patients_all
from .records._cases import *  # noqa: F403
from .records._cases import __all__ as _records_cases_all
from .records._documents import *  # noqa: F403
from .records._documents import __all__ as _records_documents_all
from .records._processing import *  # noqa: F403
from .records._processing import __all__ as _records_processing_all
from .registries._hfr import *  # noqa: F403
from .registries._hfr import __all__ as _registries_hfr_all
from .registries._hpr import *  # noqa: F403
from .registries._hpr import __all__ as _registries_hpr_all
from .webhooks._subscriptions import *  # noqa: F403
from .webhooks._subscriptions import __all__ as _webhooks_subscriptions_all

__all__ = [
    *_records_cases_all,
    *_records_documents_all,
    *_records_processing_all,
    *_patients_patients_all,
    *_abha_kyc_all,
    *_abha_profile_all,
    *_abha_registration_all,
    *_abha_scan_share_all,
    *_abdm_consents_all,
    *_abdm_discover_all,
    *_abdm_events_all,
    *_abdm_hiu_all,
    *_abdm_hospital_all,
    *_abdm_requests_all,
    *_abdm_user_linking_all,
    *_registries_hfr_all,
    *_registries_hpr_all,
    *_webhooks_subscriptions_all,
]
