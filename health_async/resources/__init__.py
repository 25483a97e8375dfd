"""The client's resource namespaces: ``client.documents``, ``client.abha``, ``client.profiles``."""

from .abha import Abha
from .documents import Documents
from .profiles import Profiles

__all__ = ["Abha", "Documents", "Profiles"]
