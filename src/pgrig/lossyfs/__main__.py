"""``python -m pgrig.lossyfs serve ...``: the filesystem process (see server.py)."""

import sys

from pgrig.lossyfs.server import main

sys.exit(main())
