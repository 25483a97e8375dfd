"""Models of milestone 4's registries: the professional registry (HPR: a doctor's or nurse's HPR ID) and the
facility registry (HFR: a hospital's or clinic's HFR ID); imported from :mod:`health_async.models`."""

from ._hfr import *  # noqa: F403
from ._hfr import __all__ as _hfr_all
from ._hpr import *  # noqa: F403
from ._hpr import __all__ as _hpr_all

__all__ = [*_hfr_all, *_hpr_all]
