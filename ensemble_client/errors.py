"""What can go wrong, as exceptions a caller can catch by kind.

Every exception of the client derives from :class:`EnsembleClientError`. A problem the
server answered (RFC 9457 ``application/problem+json``) becomes an :class:`ApiError`
subclass chosen by its HTTP status, carrying the problem's ``status``, ``code``,
``detail`` and ``errors`` (each with its ``loc``, a path into the request), so that::

    try:
        client.models.train("iris-rf", dataset="iris", target="species", ensemble=spec)
    except InvalidRequestError as exc:
        for item in exc.errors:
            print(item.loc, item.msg)   # ['ensemble', 'params', 'n_estimators'] must be ...

A server that cannot be reached is a :class:`ServerUnreachableError` naming the URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from ensemble_client.models import Job


class ProblemItem(BaseModel):
    """One thing wrong with a request, and where (``loc``: a path into the request)."""

    model_config = ConfigDict(extra="allow")

    loc: list[str | int] = Field(default_factory=list)
    msg: str = ""


class Problem(BaseModel):
    """An RFC 9457 problem, as the service writes it."""

    model_config = ConfigDict(extra="allow")

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str | None = None
    instance: str | None = None
    code: str = "unknown"
    request_id: str | None = None
    errors: list[ProblemItem] | None = None


class EnsembleClientError(Exception):
    """The root of every exception this client raises."""


class ServerUnreachableError(EnsembleClientError, ConnectionError):
    """No answer from the service at ``url`` (down, wrong address, or a network problem)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"cannot reach the Ensemble service at {url}: {reason}")


class InvalidArgumentError(EnsembleClientError, ValueError):
    """An argument the client refuses before sending anything: a URL that is not http(s),
    an API key that cannot be an HTTP header, a name that would change a request's path."""


class ApiError(EnsembleClientError):
    """A problem answered by the service: ``status``, ``code``, ``detail`` and ``errors``."""

    def __init__(self, problem: Problem, *, retry_after: float | None = None) -> None:
        self.problem = problem
        self.status = problem.status
        self.code = problem.code
        self.title = problem.title
        self.detail = problem.detail or problem.title or f"HTTP {problem.status}"
        self.errors: list[ProblemItem] = list(problem.errors or [])
        self.request_id = problem.request_id
        self.retry_after = retry_after
        super().__init__(self._message())

    def _message(self) -> str:
        text = f"{self.status} {self.code}: {self.detail}"
        for item in self.errors[:20]:
            where = ".".join(str(part) for part in item.loc) or "(request)"
            text += f"\n  {where}: {item.msg}"
        if len(self.errors) > 20:
            text += f"\n  ... and {len(self.errors) - 20} more"
        return text


class InvalidRequestError(ApiError, ValueError):
    """400 or 422: the request was refused; ``errors`` says where and why."""


class AuthenticationError(ApiError):
    """401: no API key, or an unknown one (set ``api_key`` or ``ENSEMBLE_API_KEY``)."""


class PermissionDeniedError(ApiError):
    """403: the API key's role does not allow this call."""


class NotFoundError(ApiError, LookupError):
    """404: no such dataset, model, version, alias or job."""


class ConflictError(ApiError):
    """409: the call conflicts with the current state (e.g. an alias points at the version)."""


class PayloadTooLargeError(ApiError):
    """413: over a size limit of the service (body bytes, rows)."""


class UnsupportedFormatError(ApiError):
    """415: the service cannot read this kind of body."""


class RateLimitedError(ApiError):
    """429: the training queue is full; ``retry_after`` says when to try again."""


class ServiceUnavailableError(ApiError):
    """503: the service is not ready (its database or store is unreachable)."""


class ServerError(ApiError):
    """500 and other 5xx answers: a bug or an outage on the server's side."""


class JobFailedError(ApiError):
    """A training job ended ``failed`` (or ``cancelled``): ``job`` is the job, and the
    problem is the job's ``error``."""

    def __init__(self, problem: Problem, job: Job) -> None:
        self.job = job
        super().__init__(problem)


class JobCancelledError(JobFailedError):
    """A training job ended ``cancelled``: no version was made."""


class WaitTimeoutError(EnsembleClientError, TimeoutError):
    """A job did not end within the time given to wait for it; it keeps running."""

    def __init__(self, job_id: str, seconds: float) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} did not end within {seconds:g} s; it keeps running")


class ArtifactIntegrityError(EnsembleClientError):
    """A downloaded artifact's sha256 differs from the one the service announced."""


class MissingDependencyError(EnsembleClientError, ImportError):
    """An optional library (pandas, pyarrow) is needed for this call."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedFormatError,
    422: InvalidRequestError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def error_class(status: int) -> type[ApiError]:
    """The exception class for an HTTP status (ServerError for other 5xx, ApiError else)."""
    return _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)


def problem_of(status: int, body: bytes, content_type: str) -> Problem:
    """The problem an error answer carries; a non-problem body (a proxy's HTML page, say)
    becomes a problem whose detail quotes its start."""
    if "json" in content_type:
        try:
            problem = Problem.model_validate_json(body)
        except ValidationError:
            pass
        else:
            return problem if problem.status else problem.model_copy(update={"status": status})
    text = body.decode("utf-8", errors="replace").strip()
    detail = f"HTTP {status}" + (f": {text[:300]}" if text else "")
    return Problem(title=f"HTTP {status}", status=status, detail=detail, code=f"http_{status}")


def api_error(
    status: int, body: bytes, content_type: str, retry_after: float | None = None
) -> ApiError:
    """The exception for an error answer."""
    problem = problem_of(status, body, content_type)
    return error_class(status)(problem, retry_after=retry_after)


def job_error(job: Job, detail: Any = None) -> JobFailedError:
    """The exception for a job that ended without a version."""
    if job.status == "cancelled":
        problem = Problem(
            title="Job cancelled",
            status=409,
            code="cancelled",
            detail=detail or f"job {job.id} was cancelled; no version was made",
        )
        return JobCancelledError(problem, job)
    problem = job.error or Problem(
        title="Training failed", status=500, code="training_failed", detail=f"job {job.id} failed"
    )
    return JobFailedError(problem, job)
