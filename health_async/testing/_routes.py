"""The fake server's own description of the service: every path and header name it serves.

Written from the vendor's files in the project's ``spec/`` folder (``service-interface.md``,
``service-facts.md`` and the vendor's OpenAPI files ``vendor/records.yaml``, ``vendor/registration.yml``,
``vendor/patient_directory.yml``, ``vendor/authorization.yml``, plus ``vendor/guide.mdx`` and
``vendor/webhook-signature.mdx``), each name with the file it comes from. It imports nothing of the client on
purpose: the fake is the other side, not a mirror, so a wrong path or header name in the client (or here) shows up
as a failing test instead of being copied into both.

Path templates use aiohttp's ``{name}`` placeholders, named as the vendor names them.
"""

from __future__ import annotations

from typing import Final

# ---------------------------------------------------------------------------------------------- headers

#: service-interface.md section 5 ("Authorization: Bearer <ACCESS_TOKEN>"); authorization.yml (refresh-token).
AUTHORIZATION: Final = "Authorization"
#: patient_directory.yml (every operation, required); authorization.yml spells it ``Client-Id`` on refresh-token
#: (header names are case-insensitive).
CLIENT_ID: Final = "client-id"
#: records.yaml (describe, list, presigned batch, PATCH/DELETE, result, cases); registration.yml (optional).
PT_ID: Final = "X-Pt-Id"
#: registration.yml (optional on every ``/abdm/na/v1/...`` operation); the fake accepts it and does not read it.
PARTNER_PT_ID: Final = "X-Partner-Pt-Id"
#: registration.yml (optional on every ``/abdm/na/v1/...`` operation); the fake accepts it and does not read it.
HIP_ID: Final = "X-Hip-Id"
#: guide.mdx and service-interface.md section 5 ("X-Encryption: JWE").
ENCRYPTION: Final = "X-Encryption"
#: The value of :data:`ENCRYPTION` on an encrypted request (guide.mdx).
ENCRYPTION_JWE: Final = "JWE"
#: records.yaml, getDocuments: ``accept`` required, enum ``application/json``.
ACCEPT: Final = "Accept"
#: Not in the vendor's files: standard HTTP (RFC 9110 section 10.2.3), sent with the fake's injected faults.
RETRY_AFTER: Final = "Retry-After"
#: webhook-signature.mdx: ``Eka-Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``.
WEBHOOK_SIGNATURE: Final = "Eka-Webhook-Signature"

# ---------------------------------------------------------------------------------------------- tokens

#: authorization.yml: ``POST /connect-auth/v1/account/login``.
LOGIN: Final = "/connect-auth/v1/account/login"
#: authorization.yml: ``POST /connect-auth/v1/account/refresh-token`` (``/refresh`` is the deprecated one).
REFRESH: Final = "/connect-auth/v1/account/refresh-token"

# ---------------------------------------------------------------------------------------------- records

#: records.yaml: ``GET`` (getDocuments, the list) and ``POST`` (getAuthorization, the presigned batch).
DOCUMENTS: Final = "/mr/api/v1/docs"
#: records.yaml: ``GET`` (getDocument), ``PATCH`` and ``DELETE`` of ``/mr/api/v1/docs/{id}``.
DOCUMENT: Final = "/mr/api/v1/docs/{id}"
#: records.yaml: ``POST /mr/api/v2/docs`` (uploadDocument).
UPLOAD: Final = "/mr/api/v2/docs"
#: records.yaml: ``GET /mr/api/v1/docs/{document_id}/result`` (getResult).
RESULT: Final = "/mr/api/v1/docs/{document_id}/result"
#: records.yaml: ``GET`` and ``POST /mr/api/v1/cases``.
CASES: Final = "/mr/api/v1/cases"
#: records.yaml: ``PATCH`` and ``DELETE /mr/api/v1/cases/{id}``.
CASE: Final = "/mr/api/v1/cases/{id}"

# ---------------------------------------------------------------------------------------------- profiles

#: patient_directory.yml: ``GET`` and ``PATCH /profiles/v1/emr-user/{oid}``.
EMR_USER: Final = "/profiles/v1/emr-user/{oid}"
#: patient_directory.yml: ``POST /profiles/v1/patient/`` (create; trailing slash as written).
PATIENT_CREATE: Final = "/profiles/v1/patient/"
#: patient_directory.yml: ``GET /profiles/v1/patient/minified/``.
PATIENT_LIST: Final = "/profiles/v1/patient/minified/"
#: patient_directory.yml: ``GET /profiles/v1/patient/search``.
PATIENT_SEARCH: Final = "/profiles/v1/patient/search"
#: patient_directory.yml: ``GET /profiles/v1/patient/by-mobile/``.
PATIENT_BY_MOBILE: Final = "/profiles/v1/patient/by-mobile/"
#: patient_directory.yml: ``GET /profiles/v1/patient/{username}/username/?flatten=true`` (``flatten=true`` is a
#: query parameter written into the path key).
PATIENT_BY_USERNAME: Final = "/profiles/v1/patient/{username}/username/"
#: patient_directory.yml: ``GET``, ``PATCH`` and ``DELETE /profiles/v1/patient/{oid}``.
PATIENT: Final = "/profiles/v1/patient/{oid}"

# ---------------------------------------------------------------------------------------------- ABHA

_REGISTRATION: Final = "/abdm/na/v1/registration"
_LOGIN: Final = "/abdm/na/v1/profile/login"

#: registration.yml: ``POST /abdm/na/v1/registration/aadhaar/init`` (also service-interface.md section 4.3).
AADHAAR_INIT: Final = f"{_REGISTRATION}/aadhaar/init"

#: registration.yml: the ABHA milestone-1 operations besides ``aadhaar_init``, as ``name -> (method, path)``.
#: The names are the fake's route names (for ``server.inject`` and ``server.calls``); the order of the calls is
#: in abha-onboarding.mdx and abha-m1-flows.mdx.
ABHA: Final[dict[str, tuple[str, str]]] = {
    "aadhaar_resend": ("POST", f"{_REGISTRATION}/aadhaar/resend"),
    "aadhaar_verify": ("POST", f"{_REGISTRATION}/aadhaar/verify"),
    "aadhaar_mobile_verify": ("POST", f"{_REGISTRATION}/aadhaar/mobile/verify"),
    "aadhaar_mobile_resend": ("POST", f"{_REGISTRATION}/aadhaar/mobile/resend"),
    "aadhaar_create": ("POST", f"{_REGISTRATION}/aadhaar/create-phr"),
    "auto_login": ("POST", f"{_REGISTRATION}/aadhaar/auto-login"),
    "mobile_init": ("POST", f"{_REGISTRATION}/mobile/init"),
    "mobile_resend": ("POST", f"{_REGISTRATION}/mobile/resend"),
    "mobile_verify": ("POST", f"{_REGISTRATION}/mobile/verify"),
    "mobile_create": ("POST", f"{_REGISTRATION}/mobile/create-phr"),
    "address_exists": ("POST", f"{_REGISTRATION}/phr/check"),
    "suggest_addresses": ("GET", f"{_REGISTRATION}/suggest"),
    "login_methods": ("POST", f"{_LOGIN}/methods"),
    "login_init": ("POST", f"{_LOGIN}/init"),
    "login_verify": ("POST", f"{_LOGIN}/verify"),
    "login_phr": ("POST", f"{_LOGIN}/phr"),
}

#: Not stated in the vendor's files (registration.yml: ``otp`` is a string): the fake's judgement call, the
#: six digits ABDM sends; the fake answers a malformed OTP with ``ABDM-1006``.
OTP_LENGTH: Final = 6
#: ABHA address suffixes: ``@abdm`` in registration.yml's examples and abha-onboarding.mdx, ``@sbx`` (sandbox)
#: in the examples of abdm-connect/webhooks/*.mdx.
ABHA_ADDRESS_SUFFIXES: Final = frozenset({"abdm", "sbx"})

# ---------------------------------------------------------------------------------------------- ABDM exchange (HIP)

#: registration.yml: ``POST /abdm/v1/care-contexts/link`` (LinkCareContextLinkingRequest; 202).
CARE_CONTEXTS_LINK: Final = "/abdm/v1/care-contexts/link"
#: registration.yml: ``GET /abdm/v1/care-contexts/linked?hip_id=&oid=`` (RecordsResponse).
CARE_CONTEXTS_LINKED: Final = "/abdm/v1/care-contexts/linked"
#: registration.yml: ``POST /abdm/v1/care-contexts/sms/notify`` (``{"mobile_number"}``; 202).
CARE_CONTEXTS_NOTIFY: Final = "/abdm/v1/care-contexts/sms/notify"
#: registration.yml: ``POST /abdm/v1/hip/care-context/data/on-fetch`` (RecordsHipDataPushRequest; 202).
HIP_DATA_ON_FETCH: Final = "/abdm/v1/hip/care-context/data/on-fetch"
#: registration.yml: ``POST /abdm/v1/hip/onboard`` (ModelsAddFacilityRequest -> ModelsAddFacilityResponse).
HIP_ONBOARD: Final = "/abdm/v1/hip/onboard"
#: registration.yml: ``GET /abdm/v1/care-contexts/providers?oid=`` (ProviderResponse).
CARE_CONTEXTS_PROVIDERS: Final = "/abdm/v1/care-contexts/providers"
#: registration.yml: the HIP's answers to a patient's own discovery (care-contexts/discover/introduction.mdx):
#: ``POST /abdm/v1/care-contexts/on-discover`` (ModelsDiscoverCareContextHmisConnect),
#: ``/discover/link/on-init`` (ModelsLinkOnInitHmisConnect), ``/discover/link/on-confirm``
#: (ModelsLinkOnConfirmHmisConnect); each 204.
ON_DISCOVER: Final = "/abdm/v1/care-contexts/on-discover"
DISCOVER_LINK_ON_INIT: Final = "/abdm/v1/care-contexts/discover/link/on-init"
DISCOVER_LINK_ON_CONFIRM: Final = "/abdm/v1/care-contexts/discover/link/on-confirm"
#: registration.yml, LinkCareContextMeta.hi_type's enum (also the hi_types of webhooks/hip-data-fetch.mdx).
HI_TYPES: Final = frozenset(
    {"OPConsultation", "Prescription", "DischargeSummary", "DiagnosticReport", "ImmunizationRecord",
     "HealthDocumentRecord", "WellnessRecord"}
)  # fmt: skip

# ------------------------------------------------------------------------------------ the ABHA after registration

#: registration.yml: ``GET``, ``PATCH`` and ``DELETE /abdm/v1/profile``.
ABHA_PROFILE: Final = "/abdm/v1/profile"
#: registration.yml: ``GET /abdm/v1/profile/asset/card`` (the ABHA card, an image or PDF).
ABHA_CARD: Final = "/abdm/v1/profile/asset/card"
#: registration.yml: ``GET /abdm/v1/profile/asset/qr``.
ABHA_QR: Final = "/abdm/v1/profile/asset/qr"
#: registration.yml: ``POST /abdm/v1/profile/kyc/init``, ``/resend``, ``/verify``.
KYC_INIT: Final = "/abdm/v1/profile/kyc/init"
KYC_RESEND: Final = "/abdm/v1/profile/kyc/resend"
KYC_VERIFY: Final = "/abdm/v1/profile/kyc/verify"
#: registration.yml: ``POST /abdm/v1/profile/search``.
ABHA_SEARCH: Final = "/abdm/v1/profile/search"
#: registration.yml: ``GET /abdm/v1/registration/pincode/{pincode}``.
PINCODE: Final = "/abdm/v1/registration/pincode/{pincode}"
#: registration.yml: ``POST /abdm/v2/profile/share`` and ``GET /abdm/v2/profile/share/{request_id}`` (patient side).
PROFILE_SHARE: Final = "/abdm/v2/profile/share"
PROFILE_SHARE_STATUS: Final = "/abdm/v2/profile/share/{request_id}"
#: registration.yml: ``POST /abdm/v1/hip/patient/profile/on-share`` (hospital side: the token).
PROFILE_ON_SHARE: Final = "/abdm/v1/hip/patient/profile/on-share"
#: registration.yml: ``POST /abdm/v1/session/init``, ``/verify``; ``GET /abdm/v1/session/status``.
SESSION_INIT: Final = "/abdm/v1/session/init"
SESSION_VERIFY: Final = "/abdm/v1/session/verify"
SESSION_STATUS: Final = "/abdm/v1/session/status"

# ------------------------------------------------------------------------------- milestone 4: HPR and HFR

_NHPR: Final = "/abdm/nhpr/v1"

#: registration.yml: the professional registry (HPR) operations, as ``name -> (method, path)``; the names are the
#: fake's route names (for ``server.inject`` and ``server.calls``). The order of the calls is in
#: abdm-connect/flows/m4.mdx (Aadhaar OTP -> verify -> verify mobile; HPR info -> exists? -> suggest -> create).
HPR: Final[dict[str, tuple[str, str]]] = {
    "hpr_aadhaar_init": ("POST", f"{_NHPR}/hpr/aadhaar/init"),  # ModelsHPRIDAadhaarInitRequest {aadhaar}
    "hpr_aadhaar_verify": ("POST", f"{_NHPR}/hpr/aadhaar/verify"),  # NhprEKAAadhaarVerifyRequest {otp, txn_id}
    "hpr_demo_verify": ("POST", f"{_NHPR}/hpr/aadhaar/demo/verify"),  # NhprMobileOTPRequest {mobile_num, txn_id}
    "hpr_mobile_init": ("POST", f"{_NHPR}/hpr/aadhaar/mobile/init"),  # NhprMobileOTPRequest {mobile_num, txn_id}
    "hpr_mobile_verify": ("POST", f"{_NHPR}/hpr/aadhaar/mobile/verify"),  # NhprMobileVerifyRequest {otp, txnId}
    "hpr_check_exist": ("POST", f"{_NHPR}/hpr/aadhaar/check/exist"),  # NhprTransactionId {mobile_num, txn_id}
    "hpr_check_available": ("POST", f"{_NHPR}/hpr/aadhaar/check/available"),  # NhprDoesHprExistRequest {hprId}
    "hpr_suggest": ("POST", f"{_NHPR}/hpr/aadhaar/suggest"),  # NhprTransactionId {mobile_num, txn_id}
    "hpr_create": ("POST", f"{_NHPR}/hpr/aadhaar/create"),  # NhprEKACreateHPRID {txnId, hprId, password, ...}
}
#: registration.yml: the facility registry (HFR) operations, as ``name -> (method, path)``; ``{hfrId}`` as the
#: vendor names it. Onboard and link both take NhprUpdateBridgeRequest ``{clinic_id, hfr_id}``.
HFR: Final[dict[str, tuple[str, str]]] = {
    "hfr_search": ("GET", f"{_NHPR}/hfr/search/{{hfrId}}"),
    "hfr_onboard": ("POST", f"{_NHPR}/hfr/onboard"),
    "hfr_link": ("POST", f"{_NHPR}/hfr/link"),
}

# ------------------------------------------------------------------------------------------ webhook subscriptions

#: connect-webhooks/webhooks.yml: ``GET`` and ``POST /notification/v1/connect/webhook/subscriptions``.
WEBHOOK_SUBSCRIPTIONS: Final = "/notification/v1/connect/webhook/subscriptions"
#: connect-webhooks/webhooks.yml: ``DELETE /notification/v1/connect/webhook/subscriptions/{id}``.
WEBHOOK_SUBSCRIPTION: Final = "/notification/v1/connect/webhook/subscriptions/{id}"

# ------------------------------------------------------------------- ABDM exchange (patient's app, requester: HIU)

#: registration.yml: ``GET /abdm/v1/providers`` (search) and ``GET /abdm/v1/provider/{hip_id}``.
PROVIDERS: Final = "/abdm/v1/providers"
PROVIDER: Final = "/abdm/v1/provider/{hip_id}"
#: registration.yml: ``POST /abdm/v1/care-contexts/discover``, ``/discover/link/init``, ``/discover/link/confirm``.
DISCOVER: Final = "/abdm/v1/care-contexts/discover"
DISCOVER_LINK_INIT: Final = "/abdm/v1/care-contexts/discover/link/init"
DISCOVER_LINK_CONFIRM: Final = "/abdm/v1/care-contexts/discover/link/confirm"
#: registration.yml: ``/abdm/v1/consents/{create,list,details,approve,deny,revoke,auto-approval}``.
CONSENTS_CREATE: Final = "/abdm/v1/consents/create"
CONSENTS_LIST: Final = "/abdm/v1/consents/list"
CONSENTS_DETAILS: Final = "/abdm/v1/consents/details"
CONSENTS_APPROVE: Final = "/abdm/v1/consents/approve"
CONSENTS_DENY: Final = "/abdm/v1/consents/deny"
CONSENTS_REVOKE: Final = "/abdm/v1/consents/revoke"
CONSENTS_AUTO_APPROVAL: Final = "/abdm/v1/consents/auto-approval"
#: registration.yml: ``/abdm/v1/consents/pin/{exists,set,verify,change,forgot/init,forgot/verify,reset}``.
PIN_EXISTS: Final = "/abdm/v1/consents/pin/exists"
PIN_SET: Final = "/abdm/v1/consents/pin/set"
PIN_VERIFY: Final = "/abdm/v1/consents/pin/verify"
PIN_CHANGE: Final = "/abdm/v1/consents/pin/change"
PIN_FORGOT_INIT: Final = "/abdm/v1/consents/pin/forgot/init"
PIN_FORGOT_VERIFY: Final = "/abdm/v1/consents/pin/forgot/verify"
PIN_RESET: Final = "/abdm/v1/consents/pin/reset"
#: registration.yml: ``GET /abdm/v1/requests`` and ``GET /abdm/v1/request`` (consent and subscription requests).
REQUESTS: Final = "/abdm/v1/requests"
REQUEST: Final = "/abdm/v1/request"
#: registration.yml: ``PATCH /abdm/v1/hiu/keyset`` and ``POST /abdm/v1/hiu/care-context/data/on-push``.
HIU_KEYSET: Final = "/abdm/v1/hiu/keyset"
HIU_DATA_ON_PUSH: Final = "/abdm/v1/hiu/care-context/data/on-push"
