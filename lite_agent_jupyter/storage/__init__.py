"""Where run data lives: the storage root, its namespaces, and the content-addressed blob store.

Layout (SPEC §9)::

    <root>/.gitignore            "*"  - run data never ends up in a commit by accident
    <root>/<namespace>/sessions/ file-backend logs (one JSONL per session)
    <root>/<namespace>/blobs/    file snapshots, content-addressed (sha256), and
                                 blobs/refs/: who uses which blob (see docs/blob-collection.md)
    <root>/<namespace>/tasks/    task lists
    <root>/<namespace>/archive/  log tails cut by a restore (so a restore can be undone)

Folders are created 0700 and files 0600: sessions hold code and conversations, which are
private to the user. Nothing is created until first needed, so ``sessions=False`` and merely
constructing a :class:`Storage` write nothing.

The package, one module per job: ``private.py`` the 0700/0600 helpers; ``blobs.py`` the blob
vocabulary (hash, references, the :class:`Blobs` protocol) and the memory store;
``collection.py`` blob collection (docs/blob-collection.md); ``blobstore.py`` the file blob
store; ``root.py`` the root and its namespaces. Imports go private <- blobs <- collection <-
blobstore <- root. It knows nothing of agents or sessions' contents; the checkpoint backends
and the file tools use it.
"""

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from .blobs import (
        DELTA_MIN_SIZE,
        MAX_CHAIN,
        PROCESS_SCOPE_PREFIX,
        BlobCollection,
        BlobRef,
        Blobs,
        MemoryBlobStore,
        SupportsPutMany,
        blob_hash,
        process_scope,
    )
    from .blobstore import FileBlobStore
    from .collection import REFS_DIR
    from .private import DIR_MODE, FILE_MODE, ensure_private_dir, write_private_file
    from .root import (
        NAMESPACE_PATTERN,
        Storage,
        default_root,
        legacy_notebook_namespace,
        namespace_for,
        notebook_namespace,
        validate_namespace,
    )

_LAZY = {
    ".blobs": (
        "DELTA_MIN_SIZE",
        "MAX_CHAIN",
        "PROCESS_SCOPE_PREFIX",
        "BlobCollection",
        "BlobRef",
        "Blobs",
        "MemoryBlobStore",
        "SupportsPutMany",
        "blob_hash",
        "process_scope",
    ),
    ".blobstore": ("FileBlobStore",),
    ".collection": ("REFS_DIR",),
    ".private": (
        "DIR_MODE",
        "FILE_MODE",
        "ensure_private_dir",
        "write_private_file",
    ),
    ".root": (
        "NAMESPACE_PATTERN",
        "Storage",
        "default_root",
        "legacy_notebook_namespace",
        "namespace_for",
        "notebook_namespace",
        "validate_namespace",
    ),
}
"""Public names imported on first use (``_lazy.py``, #32)."""

__getattr__, __dir__ = attach(__name__, _LAZY)


__all__ = [
    "DELTA_MIN_SIZE",
    "DIR_MODE",
    "FILE_MODE",
    "MAX_CHAIN",
    "NAMESPACE_PATTERN",
    "PROCESS_SCOPE_PREFIX",
    "REFS_DIR",
    "BlobCollection",
    "BlobRef",
    "Blobs",
    "FileBlobStore",
    "MemoryBlobStore",
    "Storage",
    "SupportsPutMany",
    "blob_hash",
    "default_root",
    "ensure_private_dir",
    "legacy_notebook_namespace",
    "namespace_for",
    "notebook_namespace",
    "process_scope",
    "validate_namespace",
    "write_private_file",
]
