"""`python -m graphrt.cli ...`: the `graphrt` command without its console script."""

import sys

from graphrt.cli.main import main

sys.exit(main())
