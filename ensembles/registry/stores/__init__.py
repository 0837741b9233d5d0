"""Where the registry keeps its bytes: implementations of ``base.ArtifactStore``.

``LocalStore`` (a folder under the data folder) is the default; ``S3Store``
(:mod:`ensembles.registry.stores.s3`, imported only when configured, with boto3) keeps
them in an S3-compatible bucket. ``open_store(StoreConfig(...))`` picks one from
configuration; neither needs anything from the registry but the protocol.
"""

from ensembles.registry.stores.local import LocalStore
from ensembles.registry.stores.location import StoreConfig, open_store, parse_s3_url

__all__ = ["LocalStore", "StoreConfig", "open_store", "parse_s3_url"]
