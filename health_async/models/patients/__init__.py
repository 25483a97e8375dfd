"""Models of people: the patient directory and EMR user profiles; imported from :mod:`health_async.models`."""

from ._patients import *  # noqa: F403
from ._patients import __all__ as _patients_all

__all__ = [*_patients_all]
