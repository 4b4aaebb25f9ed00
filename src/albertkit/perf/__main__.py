"""``python -m albertkit.perf``: the benchmark's worker processes (internal).

``worker FRAMEWORK SETTINGS_JSON`` serves one framework to ``albertkit benchmark``;
``rank SETTINGS_JSON`` is one process of a launched data-parallel measurement.
"""

import sys

from albertkit.perf.runner import rank_main, worker_main

if len(sys.argv) == 4 and sys.argv[1] == "worker":
    raise SystemExit(worker_main(sys.argv[2], sys.argv[3]))
if len(sys.argv) == 3 and sys.argv[1] == "rank":
    raise SystemExit(rank_main(sys.argv[2]))
raise SystemExit("usage: python -m albertkit.perf worker FRAMEWORK SETTINGS_JSON "
                 "(internal; use `albertkit benchmark`)")
