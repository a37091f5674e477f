"""`python -m lab.routing.dataset`: write the routing data set (see the package docstring)."""

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
