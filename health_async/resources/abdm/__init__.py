"""``client`` namespaces of ABDM's exchange: the hospital's side, discover and link, consents and the PIN, the patient's
requests, the requester (HIU).

The public names of this domain's resource modules; the resources themselves are also in
:mod:`health_async.resources`."""

from .abdm import MAX_CARE_CONTEXT_ID, MEDIA, Abdm, bundle_bytes, checksum, link_entry
from .consents import Consents

__all__ = ["Abdm", "Consents", "MAX_CARE_CONTEXT_ID", "MEDIA", "bundle_bytes", "checksum", "link_entry"]
