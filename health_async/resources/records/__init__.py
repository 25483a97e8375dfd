"""``client`` namespaces of the records lifecycle: documents, cases, presigned uploads, processing results.

The public names of this domain's resource modules; the resources themselves are also in
:mod:`health_async.resources`."""

from .cases import Cases
from .documents import KNOWN_TASKS, Documents, task_params

__all__ = ["Cases", "Documents", "KNOWN_TASKS", "task_params"]
