"""Portability of a session with its rewind points: archives (``rewind export/import``) and remotes.

Library only: nothing here prints; operations return reports and raise ``LedgerError`` subclasses.
"""

from ledger.portable.archive import Limits, Manifest
from ledger.portable.transfer import (
    ExportReport,
    ImportReport,
    export_archive,
    export_remote,
    import_archive,
    import_remote,
)

__all__ = [
    "ExportReport",
    "ImportReport",
    "Limits",
    "Manifest",
    "export_archive",
    "export_remote",
    "import_archive",
    "import_remote",
]
