"""Service settings: environment variables with the prefix ``ENSEMBLE_``.

No instance lives at module level: ``create_app(settings)`` takes one (tests vary it) and
``create_app()`` reads the environment when the app is built, never at import.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:  # imported when used: the launcher reads settings without the library
    from ensembles import SpecLimits, TableLimits
    from ensembles.inference.row_parts import RowParts
    from ensembles.registry.stores import StoreConfig

Role = Literal["read", "train", "admin"]
ROLES: tuple[Role, ...] = ("read", "train", "admin")
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
MIB = 1024 * 1024
MAX_WORKERS: Final = 64
WORKERS_HELP: Final = (
    f"ENSEMBLE_WORKERS is the number of server processes: a whole number from 1 to "
    f"{MAX_WORKERS}, or auto (one per CPU this process may use)"
)

MAX_PREDICT_THREADS: Final = 256
PREDICT_THREADS_HELP: Final = (
    "ENSEMBLE_PREDICT_THREADS is the number of threads one big prediction request may be "
    f"answered on: a whole number from 1 to {MAX_PREDICT_THREADS}, or auto (the CPUs this "
    "process may use divided by ENSEMBLE_WORKERS)"
)


def parse_predict_threads(value: object) -> int | Literal["auto"]:
    """``ENSEMBLE_PREDICT_THREADS``: a whole number from 1 to MAX_PREDICT_THREADS, or ``auto``."""
    return parse_count_or_auto(value, MAX_PREDICT_THREADS, PREDICT_THREADS_HELP)


def parse_api_keys(value: object) -> dict[str, Role]:
    """``key:role,key2:role2`` -> {key: role}; a dict passes through (validated by pydantic)."""
    if not isinstance(value, str):
        return value  # type: ignore[return-value]
    keys: dict[str, Role] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        key, sep, role = item.rpartition(":")
        if not sep or not key or role not in ROLES:
            raise ValueError(
                "ENSEMBLE_API_KEYS is a comma-separated list of key:role pairs, "
                f"role one of {', '.join(ROLES)}"
            )
        keys[key] = role
    return keys


def check_object_store(value: str | None) -> str | None:
    """``ENSEMBLE_OBJECT_STORE``: empty or unset (the data folder), a folder, or an
    ``s3://bucket/prefix`` URL with a valid bucket name; any other URL is refused."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.startswith("s3://"):
        from ensembles.registry.stores.location import parse_s3_url

        parse_s3_url(value)  # ValueError says what is wrong
    elif "://" in value:
        raise ValueError("ENSEMBLE_OBJECT_STORE is a local folder or s3://bucket/prefix")
    return value


CGROUP: Final = Path("/sys/fs/cgroup")


def available_cpus(cgroup: Path = CGROUP) -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota
    (a container started with ``--cpus 2`` on a larger host gets 2)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpu_quota(cgroup)
    return max(1, min(cpus, quota) if quota is not None else cpus)


def _cgroup_cpu_quota(cgroup: Path) -> int | None:
    """``ceil(quota / period)`` of cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_*``; None: no quota."""
    candidates = (
        (cgroup / "cpu.max", None),
        (cgroup / "cpu" / "cpu.cfs_quota_us", cgroup / "cpu" / "cpu.cfs_period_us"),
    )
    for first, second in candidates:
        try:
            words = first.read_text().split()
            if second is not None:
                words.append(second.read_text().strip())
            quota, period = words[0], words[1]
            if quota in ("max", "-1"):
                return None
            return max(1, math.ceil(int(quota) / int(period)))
        except (OSError, ValueError, IndexError, ZeroDivisionError):
            continue
    return None


DASK_SCHEMES: Final = ("tcp", "tls", "ws", "wss", "ucx")
DASK_HELP: Final = (
    "ENSEMBLE_DASK_SCHEDULER is the address of a Dask scheduler, such as "
    "tcp://scheduler:8786 (scheme tcp, tls, ws, wss or ucx, then host:port)"
)


def parse_dask_scheduler(value: object) -> str | None:
    """``ENSEMBLE_DASK_SCHEDULER``: ``scheme://host:port``; empty: none (local workers)."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    scheme, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or scheme not in DASK_SCHEMES or not colon or not host or not port.isdigit():
        raise ValueError(DASK_HELP)
    return text


def parse_workers(value: object) -> int | Literal["auto"]:
    """``ENSEMBLE_WORKERS``: a whole number from 1 to MAX_WORKERS, or ``auto``."""
    return parse_count_or_auto(value, MAX_WORKERS, WORKERS_HELP)


def parse_count_or_auto(value: object, most: int, rule: str) -> int | Literal["auto"]:
    """A whole number from 1 to ``most`` (text or int, never a bool), or ``auto``;
    ``ValueError(rule)`` otherwise."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        value = int(text) if text.isascii() and text.isdigit() else text
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValueError(rule)
    return value


class Settings(BaseSettings):
    """Everything the service reads from its environment (prefix ``ENSEMBLE_``)."""

    # hide_input_in_errors: a bad ENSEMBLE_API_KEYS must not print the keys at start-up.
    model_config = SettingsConfigDict(
        env_prefix="ENSEMBLE_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    data_dir: Path = Field(
        default=Path("./data"),
        description="Folder for the registry database, datasets and artifacts.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the registry database; default: SQLite in data_dir.",
    )
    object_store: str | None = Field(
        default=None,
        description="Where datasets and artifacts live: a local folder, or "
        "s3://bucket/prefix for an S3-compatible object store; default: data_dir.",
    )
    s3_endpoint_url: str | None = Field(
        default=None,
        description="Endpoint of an S3-compatible store (MinIO, Ceph, ...); default: AWS. "
        "Credentials come from the standard AWS variables or credential chain.",
    )
    api_keys: Annotated[dict[str, Role], NoDecode] = Field(
        default_factory=dict,
        repr=False,  # secrets: never in a repr, so never in a log line or a traceback
        description="Comma-separated key:role pairs (role read, train or admin); "
        "empty: the service is open.",
    )
    open_docs: bool = Field(
        default=True,
        description="Serve /docs, /redoc, /openapi.json and the landing page / without a key "
        "even when keys are set.",
    )
    open_metrics: bool = Field(
        default=True,
        description="Serve /metrics without a key even when API keys are set (summed over "
        "models: model names only to a scrape with a key).",
    )
    max_upload_bytes: int = Field(
        default=100 * MIB, ge=1, description="Largest request body (dataset upload) in bytes."
    )
    max_dataset_rows: int = Field(default=1_000_000, ge=1, description="Most rows of a dataset.")
    max_dataset_columns: int = Field(default=1_000, ge=1, description="Most columns of a dataset.")
    max_predict_rows: int = Field(
        default=100_000, ge=1, description="Most rows in one prediction request."
    )
    batch_max_rows: int = Field(
        default=64,
        ge=1,
        description="Most rows of concurrent prediction requests answered by one engine "
        "call (adaptive batching; 1: none). Larger requests are answered alone.",
    )
    batch_max_wait_ms: float = Field(
        default=1.0,
        ge=0,
        le=1000,
        description="Longest a batch of concurrent predictions stays open for more requests "
        "while the engine is idle, in milliseconds; 0 switches batching off.",
    )
    batch_engine_thread: bool = Field(
        default=True,
        description="Answer the joined batches of one-record JSON requests (four or more) on "
        "a thread beside the event loop, which meanwhile serves the next requests (the "
        "engine releases the GIL); false: on the loop.",
    )
    max_explain_rows: int = Field(
        default=1_000, ge=1, description="Most rows in one explained prediction (413 above)."
    )
    explain_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Longest an explanation may compute; longer is a 422, not a held worker.",
    )
    max_concurrent_jobs: int = Field(
        default=1, ge=1, description="Training jobs running at once in the whole service."
    )
    max_queued_jobs: int = Field(
        default=100, ge=0, description="Jobs waiting in the whole service; more get 429."
    )
    job_timeout_s: float = Field(
        default=3600.0, gt=0, description="A training job running longer is killed and failed."
    )
    job_memory_limit_mb: int | None = Field(
        default=None,
        ge=64,
        description="Address-space limit of a training worker in MiB; none by default.",
    )
    cancel_grace_s: float = Field(
        default=2.0,
        gt=0,
        description="How long a cancelled worker may take to stop before it is terminated.",
    )
    wait_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Longest a POST .../versions?wait=true blocks before answering 202.",
    )
    cache_max_entries: int = Field(
        default=16, ge=0, description="Most loaded models kept in memory (0: no cache)."
    )
    cache_max_bytes: int = Field(
        default=1024 * MIB,
        ge=0,
        description="Most artifact bytes of loaded models kept in memory.",
    )
    shadow_queue: int = Field(
        default=100,
        ge=1,
        description="Shadow predictions waiting in one server process; when full, more are "
        "dropped (and counted) rather than slow the answers.",
    )
    fast_predict: bool = Field(
        default=True,
        description="Answer small JSON prediction requests on a lean path beside FastAPI's "
        "router (same answers, a fraction of the cost); false: every request takes the router.",
    )
    max_nesting_depth: int = Field(
        default=3, ge=1, description="Most levels of ensembles nested in one spec."
    )
    max_members_per_level: int = Field(
        default=50, ge=1, description="Most named members of one voting or stacking ensemble."
    )
    max_total_members: int = Field(
        default=20_000, ge=1, description="Most estimators one training fits across nesting."
    )
    max_bias_variance_rounds: int = Field(
        default=50,
        ge=2,
        description="Most bootstrap refits evaluation.bias_variance.rounds may ask for (each "
        "refits the ensemble and one member).",
    )

    predict_threads: Annotated[int | Literal["auto"], NoDecode] = Field(
        default="auto",
        description="Threads one big prediction request of a tree ensemble may be answered "
        f"on, its rows cut into parts (the same answers): 1 to {MAX_PREDICT_THREADS}, or auto "
        "for the CPUs this process may use divided by the server processes.",
    )
    predict_part_rows: int = Field(
        default=2_000,
        ge=1,
        description="Fewest rows of one part of a request answered on several threads: "
        "requests of fewer than twice this many rows are answered in one call.",
    )
    workers: Annotated[int | Literal["auto"], NoDecode] = Field(
        default=1,
        description="Server processes sharing the port (``python -m app`` and ``make run`` "
        f"start them): 1 to {MAX_WORKERS}, or auto for one per available CPU. Each has its "
        "own model cache; job limits apply to the whole service.",
    )
    shutdown_timeout_s: int = Field(
        default=30,
        ge=0,
        description="After SIGTERM, how long requests in flight may take to finish before "
        "they are cancelled (uvicorn's --timeout-graceful-shutdown, passed by make run).",
    )
    dask_scheduler: str | None = Field(
        default=None,
        description="Address of a Dask scheduler (tcp://host:8786): training jobs run on "
        "that cluster, their members across its workers; none: local worker processes.",
    )
    preload_training: bool = Field(
        default=True,
        description="Start the training fork server (the library preloaded, seconds of CPU "
        "and a process holding it in memory) when the server starts, so the first job "
        "starts at once; false: with the first job, which waits for the preload. For a "
        "process that serves and never trains locally, false spares both.",
    )
    log_level: LogLevel = Field(default="INFO", description="Least severe level logged.")
    log_format: Literal["json", "text"] = Field(
        default="json",
        description="Log lines as JSON objects (one per line) or as plain text for humans.",
    )

    @field_validator("object_store")
    @classmethod
    def _check_object_store(cls, value: str | None) -> str | None:
        return check_object_store(value)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("workers", mode="before")
    @classmethod
    def _parse_workers(cls, value: object) -> object:
        return parse_workers(value)

    @field_validator("predict_threads", mode="before")
    @classmethod
    def _parse_predict_threads(cls, value: object) -> object:
        return parse_predict_threads(value)

    @field_validator("dask_scheduler", mode="before")
    @classmethod
    def _parse_dask_scheduler(cls, value: object) -> object:
        return parse_dask_scheduler(value)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: object) -> object:
        return parse_api_keys(value)

    @property
    def worker_count(self) -> int:
        """How many server processes to start (``auto`` resolved on this machine)."""
        if self.workers == "auto":
            return min(available_cpus(), MAX_WORKERS)
        return self.workers

    @property
    def row_parts(self) -> RowParts:
        """How big prediction requests are cut (``auto``: this process's share of the CPUs,
        so that the server processes together use each CPU once)."""
        from ensembles.inference.row_parts import RowParts

        threads = self.predict_threads
        if threads == "auto":
            return RowParts(max(1, available_cpus() // self.worker_count), self.predict_part_rows)
        return RowParts(threads, self.predict_part_rows)

    @property
    def store(self) -> StoreConfig:
        """Where the registry keeps its bytes (:mod:`ensembles.registry.stores`)."""
        from ensembles.registry.stores import StoreConfig

        url = self.object_store
        if url is not None and not url.startswith("s3://"):
            url = str(Path(url).resolve())  # the same folder for workers, whatever their cwd
        return StoreConfig(url=url, endpoint_url=self.s3_endpoint_url)

    @property
    def spec_limits(self) -> SpecLimits:
        from ensembles import SpecLimits

        return SpecLimits(
            max_depth=self.max_nesting_depth,
            max_members_per_level=self.max_members_per_level,
            max_total_members=self.max_total_members,
        )

    @property
    def table_limits(self) -> TableLimits:
        from ensembles import TableLimits

        return TableLimits(
            max_bytes=self.max_upload_bytes,
            max_rows=self.max_dataset_rows,
            max_columns=self.max_dataset_columns,
        )
