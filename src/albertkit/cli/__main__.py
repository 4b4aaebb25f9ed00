"""``python -m albertkit.cli``: the same as the ``albertkit`` command."""

from albertkit.cli import main

raise SystemExit(main())
