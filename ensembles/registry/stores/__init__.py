"""Where the registry keeps its bytes: implementations of ``base.ArtifactStore``.

``LocalStore`` (a folder under the data folder) is the default; an object-store class
belongs next to it and needs nothing from the registry but the protocol.
"""

from ensembles.registry.stores.local import LocalStore

__all__ = ["LocalStore"]
