"""Every path of the service the client calls, in one place (templates: a path parameter is percent-encoded into
exactly one segment). Logs show these templates, never the identifiers filled into them.

Written from the vendor's files (``records.yaml``, ``registration.yml``, ``patient_directory.yml``,
``authorization.yml``); the fake server (:mod:`health_async.testing`) has its own copy written from the same files
and imports none of these, so a wrong path in either shows up as a failing test.
"""

from __future__ import annotations

from typing import Final

# records (records.yaml)
PATH_DOCUMENT: Final = "/mr/api/v1/docs/{id}"
PATH_DOCUMENTS: Final = "/mr/api/v1/docs"
PATH_UPLOAD: Final = "/mr/api/v2/docs"
PATH_RESULT: Final = "/mr/api/v1/docs/{id}/result"
PATH_CASES: Final = "/mr/api/v1/cases"
PATH_CASE: Final = "/mr/api/v1/cases/{id}"

# profiles and the patient directory (patient_directory.yml)
PATH_PROFILE: Final = "/profiles/v1/emr-user/{oid}"
PATH_PATIENT_CREATE: Final = "/profiles/v1/patient/"
PATH_PATIENT: Final = "/profiles/v1/patient/{oid}"
PATH_PATIENT_LIST: Final = "/profiles/v1/patient/minified/"
PATH_PATIENT_SEARCH: Final = "/profiles/v1/patient/search"
PATH_PATIENT_BY_MOBILE: Final = "/profiles/v1/patient/by-mobile/"
PATH_PATIENT_BY_USERNAME: Final = "/profiles/v1/patient/{username}/username/"

# ABHA registration and login (registration.yml)
_REG: Final = "/abdm/na/v1/registration"
_LOGIN: Final = "/abdm/na/v1/profile/login"
PATH_AADHAAR_INIT: Final = f"{_REG}/aadhaar/init"
PATH_AADHAAR_RESEND: Final = f"{_REG}/aadhaar/resend"
PATH_AADHAAR_VERIFY: Final = f"{_REG}/aadhaar/verify"
PATH_AADHAAR_MOBILE_VERIFY: Final = f"{_REG}/aadhaar/mobile/verify"
PATH_AADHAAR_MOBILE_RESEND: Final = f"{_REG}/aadhaar/mobile/resend"
PATH_AADHAAR_CREATE: Final = f"{_REG}/aadhaar/create-phr"
PATH_AUTO_LOGIN: Final = f"{_REG}/aadhaar/auto-login"
PATH_MOBILE_INIT: Final = f"{_REG}/mobile/init"
PATH_MOBILE_RESEND: Final = f"{_REG}/mobile/resend"
PATH_MOBILE_VERIFY: Final = f"{_REG}/mobile/verify"
PATH_MOBILE_CREATE: Final = f"{_REG}/mobile/create-phr"
PATH_PHR_CHECK: Final = f"{_REG}/phr/check"
PATH_SUGGEST: Final = f"{_REG}/suggest"
PATH_LOGIN_METHODS: Final = f"{_LOGIN}/methods"
PATH_LOGIN_INIT: Final = f"{_LOGIN}/init"
PATH_LOGIN_VERIFY: Final = f"{_LOGIN}/verify"
PATH_LOGIN_PHR: Final = f"{_LOGIN}/phr"

# ABDM exchange, hospital side (registration.yml)
PATH_CARE_CONTEXTS_LINK: Final = "/abdm/v1/care-contexts/link"
PATH_CARE_CONTEXTS_LINKED: Final = "/abdm/v1/care-contexts/linked"
PATH_CARE_CONTEXTS_NOTIFY: Final = "/abdm/v1/care-contexts/sms/notify"
PATH_HIP_DATA_ON_FETCH: Final = "/abdm/v1/hip/care-context/data/on-fetch"
PATH_HIP_ONBOARD: Final = "/abdm/v1/hip/onboard"
PATH_CARE_CONTEXTS_PROVIDERS: Final = "/abdm/v1/care-contexts/providers"
# the hospital's answers to a patient's own search (user-initiated linking)
PATH_ON_DISCOVER: Final = "/abdm/v1/care-contexts/on-discover"
PATH_DISCOVER_LINK_ON_INIT: Final = "/abdm/v1/care-contexts/discover/link/on-init"
PATH_DISCOVER_LINK_ON_CONFIRM: Final = "/abdm/v1/care-contexts/discover/link/on-confirm"

# the ABHA after registration: profile, card, KYC, search, pincode, Scan & Share, sessions (registration.yml)
PATH_ABHA_PROFILE: Final = "/abdm/v1/profile"
PATH_ABHA_CARD: Final = "/abdm/v1/profile/asset/card"
PATH_ABHA_QR: Final = "/abdm/v1/profile/asset/qr"
PATH_KYC_INIT: Final = "/abdm/v1/profile/kyc/init"
PATH_KYC_RESEND: Final = "/abdm/v1/profile/kyc/resend"
PATH_KYC_VERIFY: Final = "/abdm/v1/profile/kyc/verify"
PATH_ABHA_SEARCH: Final = "/abdm/v1/profile/search"
PATH_PINCODE: Final = "/abdm/v1/registration/pincode/{pincode}"
PATH_PROFILE_SHARE: Final = "/abdm/v2/profile/share"
PATH_PROFILE_SHARE_STATUS: Final = "/abdm/v2/profile/share/{request_id}"
PATH_PROFILE_ON_SHARE: Final = "/abdm/v1/hip/patient/profile/on-share"
PATH_SESSION_INIT: Final = "/abdm/v1/session/init"
PATH_SESSION_VERIFY: Final = "/abdm/v1/session/verify"
PATH_SESSION_STATUS: Final = "/abdm/v1/session/status"

# ABDM exchange, patient's app and requester side (registration.yml)
PATH_PROVIDERS: Final = "/abdm/v1/providers"
PATH_PROVIDER: Final = "/abdm/v1/provider/{hip_id}"
PATH_DISCOVER: Final = "/abdm/v1/care-contexts/discover"
PATH_DISCOVER_LINK_INIT: Final = "/abdm/v1/care-contexts/discover/link/init"
PATH_DISCOVER_LINK_CONFIRM: Final = "/abdm/v1/care-contexts/discover/link/confirm"
PATH_CONSENTS_CREATE: Final = "/abdm/v1/consents/create"
PATH_CONSENTS_LIST: Final = "/abdm/v1/consents/list"
PATH_CONSENTS_DETAILS: Final = "/abdm/v1/consents/details"
PATH_CONSENTS_APPROVE: Final = "/abdm/v1/consents/approve"
PATH_CONSENTS_DENY: Final = "/abdm/v1/consents/deny"
PATH_CONSENTS_REVOKE: Final = "/abdm/v1/consents/revoke"
PATH_CONSENTS_AUTO_APPROVAL: Final = "/abdm/v1/consents/auto-approval"
PATH_PIN_EXISTS: Final = "/abdm/v1/consents/pin/exists"
PATH_PIN_SET: Final = "/abdm/v1/consents/pin/set"
PATH_PIN_VERIFY: Final = "/abdm/v1/consents/pin/verify"
PATH_PIN_CHANGE: Final = "/abdm/v1/consents/pin/change"
PATH_PIN_FORGOT_INIT: Final = "/abdm/v1/consents/pin/forgot/init"
PATH_PIN_FORGOT_VERIFY: Final = "/abdm/v1/consents/pin/forgot/verify"
PATH_PIN_RESET: Final = "/abdm/v1/consents/pin/reset"
PATH_REQUESTS: Final = "/abdm/v1/requests"
PATH_REQUEST: Final = "/abdm/v1/request"
PATH_HIU_KEYSET: Final = "/abdm/v1/hiu/keyset"
PATH_HIU_DATA_ON_PUSH: Final = "/abdm/v1/hiu/care-context/data/on-push"

# milestone 4: the professional registry (HPR) and the facility registry (HFR) (registration.yml)
_NHPR: Final = "/abdm/nhpr/v1"
PATH_HPR_AADHAAR_INIT: Final = f"{_NHPR}/hpr/aadhaar/init"
PATH_HPR_AADHAAR_VERIFY: Final = f"{_NHPR}/hpr/aadhaar/verify"
PATH_HPR_DEMO_VERIFY: Final = f"{_NHPR}/hpr/aadhaar/demo/verify"
PATH_HPR_MOBILE_INIT: Final = f"{_NHPR}/hpr/aadhaar/mobile/init"
PATH_HPR_MOBILE_VERIFY: Final = f"{_NHPR}/hpr/aadhaar/mobile/verify"
PATH_HPR_CHECK_EXIST: Final = f"{_NHPR}/hpr/aadhaar/check/exist"
PATH_HPR_CHECK_AVAILABLE: Final = f"{_NHPR}/hpr/aadhaar/check/available"
PATH_HPR_SUGGEST: Final = f"{_NHPR}/hpr/aadhaar/suggest"
PATH_HPR_CREATE: Final = f"{_NHPR}/hpr/aadhaar/create"
PATH_HFR_SEARCH: Final = f"{_NHPR}/hfr/search/{{hfrId}}"
PATH_HFR_ONBOARD: Final = f"{_NHPR}/hfr/onboard"
PATH_HFR_LINK: Final = f"{_NHPR}/hfr/link"

# webhook subscriptions (connect-webhooks/webhooks.yml)
PATH_WEBHOOK_SUBSCRIPTIONS: Final = "/notification/v1/connect/webhook/subscriptions"
PATH_WEBHOOK_SUBSCRIPTION: Final = "/notification/v1/connect/webhook/subscriptions/{id}"

# tokens (authorization.yml)
PATH_LOGIN: Final = "/connect-auth/v1/account/login"
PATH_REFRESH: Final = "/connect-auth/v1/account/refresh-token"
