"""Models of the records lifecycle: documents, cases, presigned uploads, processing results; imported from
:mod:`health_async.models`."""

from ._cases import *  # noqa: F403
from ._cases import __all__ as _cases_all
from ._documents import *  # noqa: F403
from ._documents import __all__ as _documents_all
from ._processing import *  # noqa: F403
from ._processing import __all__ as _processing_all

__all__ = [*_cases_all, *_documents_all, *_processing_all]
