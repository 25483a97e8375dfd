"""The client's resource namespaces: ``client.documents``, ``client.abha``, ``client.profiles``,
``client.patients``, ``client.cases``, ``client.abdm``, ``client.webhook_subscriptions``."""

from ._abha_flow import AadhaarRegistration, AbhaFlow, AbhaLogin, AbhaSession, KycUpgrade, MobileRegistration
from ._consent_pin import ConsentPinReset
from ._discover_flow import DiscoverAndLink
from .abdm import Abdm
from .abdm_consents import Consents
from .abha import Abha
from .cases import Cases
from .documents import Documents
from .patients import Patients
from .profiles import Profiles
from .webhook_subscriptions import WebhookSubscriptions

__all__ = [
    "AadhaarRegistration",
    "Abdm",
    "Abha",
    "AbhaFlow",
    "AbhaLogin",
    "AbhaSession",
    "Cases",
    "ConsentPinReset",
    "Consents",
    "DiscoverAndLink",
    "Documents",
    "KycUpgrade",
    "MobileRegistration",
    "Patients",
    "Profiles",
    "WebhookSubscriptions",
]
