"""``python -m bench <command>``: see :mod:`bench` for the command registry."""

from bench import main

raise SystemExit(main())
