"""``python -m ledger``: the same as the ``rewind`` command."""

import sys

from ledger.cli import main

sys.exit(main())
