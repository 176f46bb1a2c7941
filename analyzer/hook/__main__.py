"""``python -m analyzer.hook claude-code``: the same as ``loopscope-hook claude-code``."""

import sys

from analyzer.hook.main import main

sys.exit(main())
