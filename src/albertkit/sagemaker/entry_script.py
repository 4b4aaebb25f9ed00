"""The entry script albertkit writes into a job's uploaded source (the SDK's ``code`` channel).

SageMaker SDK v3 runs a *script* from the source directory, not a module; this one prefers
the albertkit package shipped next to it (``ship_source``) over the image's, so a job runs
the code of the checkout that submitted it, then hands over to
``albertkit.sagemaker.entrypoint``.
"""

from __future__ import annotations

ENTRY_SCRIPT = "albertkit_entry.py"  # its name inside the uploaded source directory

ENTRY_SCRIPT_TEXT = '''"""SageMaker entry script written by albertkit: runs albertkit.sagemaker.entrypoint."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE / "albertkit" / "__init__.py").is_file():
    sys.path.insert(0, str(HERE))  # the albertkit source shipped with the job wins

from albertkit.sagemaker.entrypoint import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
'''
