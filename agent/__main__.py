"""``python -m agent``: the GPU node agent (see :mod:`agent.main`)."""

import sys

from agent.main import main

sys.exit(main())
