"""``client`` namespaces of people: the patient directory and EMR user profiles.

The public names of this domain's resource modules; the resources themselves are also in
:mod:`health_async.resources`."""

from .directory import DEFAULT_PAGE_SIZE, LIST_FIELDS, MAX_PAGE_SIZE, MAX_SEARCH_LIMIT, SEARCH_FIELDS, Patients
from .profiles import Profiles

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "LIST_FIELDS",
    "MAX_PAGE_SIZE",
    "MAX_SEARCH_LIMIT",
    "Patients",
    "Profiles",
    "SEARCH_FIELDS",
]
