"""``python -m controller.cli``: the same entry point as the ``dmrollout`` script."""

from controller.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
