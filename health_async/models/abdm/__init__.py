"""Models of ABDM's exchange: the hospital's side, discover and link, consents and the PIN, the patient's requests, the
requester (HIU); imported from :mod:`health_async.models`."""

from ._consents import *  # noqa: F403
from ._consents import __all__ as _consents_all
from ._discover import *  # noqa: F403
from ._discover import __all__ as _discover_all
from ._events import *  # noqa: F403
from ._events import __all__ as _events_all
from ._hiu import *  # noqa: F403
from ._hiu import __all__ as _hiu_all
from ._hospital import *  # noqa: F403
from ._hospital import __all__ as _hospital_all
from ._requests import *  # noqa: F403
from ._requests import __all__ as _requests_all
from ._user_linking import *  # noqa: F403
from ._user_linking import __all__ as _user_linking_all

__all__ = [*_consents_all, *_discover_all, *_events_all, *_hiu_all, *_hospital_all, *_requests_all, *_user_linking_all]
