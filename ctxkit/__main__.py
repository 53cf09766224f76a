"""python -m ctxkit"""

from ctxkit.cli import main

if __name__ == "__main__":
    main()
