"""`python -m pomoview.server.cli`: the `pomoview` command."""

import sys

from pomoview.server.cli import main

sys.exit(main())
