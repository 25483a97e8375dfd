"""Models of the ABHA (health account): registration, login, profile, KYC, Scan & Share, user sessions; imported from
:mod:`health_async.models`."""

from ._kyc import *  # noqa: F403
from ._kyc import __all__ as _kyc_all
from ._profile import *  # noqa: F403
from ._profile import __all__ as _profile_all
from ._registration import *  # noqa: F403
from ._registration import __all__ as _registration_all
from ._scan_share import *  # noqa: F403
from ._scan_share import __all__ as _scan_share_all

__all__ = [*_kyc_all, *_profile_all, *_registration_all, *_scan_share_all]
