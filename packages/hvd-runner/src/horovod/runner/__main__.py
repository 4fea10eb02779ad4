"""``python -m horovod.runner ...`` is ``horovodrun ...``."""

import sys

from horovod.runner.launch import main

sys.exit(main())
