"""The client's resource namespaces: ``client.documents``, ``client.abha``, ``client.profiles``,
``client.patients``, ``client.cases``, ``client.abdm``, ``client.hpr``, ``client.hfr``,
``client.webhook_subscriptions``."""

from .abdm._consent_pin import ConsentPinReset
from .abdm._discover_flow import DiscoverAndLink
from .abdm._guard import PUSH_WINDOW, ConsentBook, ConsentGrant, ConsentStore
from .abdm.abdm import Abdm
from .abdm.consents import Consents
from .abha._flows import AadhaarRegistration, AbhaFlow, AbhaLogin, AbhaSession, KycUpgrade, MobileRegistration
from .abha.abha import Abha
from .patients.directory import Patients
from .patients.profiles import Profiles
from .records.cases import Cases
from .records.documents import Documents
from .registries._registration import HprRegistration
from .registries.hfr import Hfr
from .registries.hpr import Hpr
from .webhooks.subscriptions import WebhookSubscriptions

__all__ = [
    "PUSH_WINDOW",
    "AadhaarRegistration",
    "Abdm",
    "Abha",
    "AbhaFlow",
    "AbhaLogin",
    "AbhaSession",
    "Cases",
    "ConsentPinReset",
    "ConsentBook",
    "ConsentGrant",
    "ConsentStore",
    "Consents",
    "DiscoverAndLink",
    "Documents",
    "Hfr",
    "Hpr",
    "HprRegistration",
    "KycUpgrade",
    "MobileRegistration",
    "Patients",
    "Profiles",
    "WebhookSubscriptions",
]
