"""`python -m runtime_core.hosting --transport http|grpc --port N --tenant T ...`."""

import sys

from runtime_core.hosting import main

sys.exit(main())
