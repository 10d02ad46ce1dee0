"""``python -m skattn.validation``: run the validation grid (the ``make validate`` entry)."""

from .grid import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
