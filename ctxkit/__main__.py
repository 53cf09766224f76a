"""python -m ctxkit"""

import sys

try:
    from ctxkit.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing: no traceback
    sys.exit(130)

if __name__ == "__main__":
    main()
