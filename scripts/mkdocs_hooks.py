"""mkdocs hook (mkdocs.yml): relative links that leave docs/ are checked against the repository.

The guides link to the runnable examples and the changelog (``../examples/finetune_squad.py``,
``../CHANGELOG.md``): files of the repository, outside the site, which work on the code host
and in a clone. mkdocs can only check links between pages, so mkdocs.yml turns its own
not-found report down to INFO and this hook checks every relative link instead: one that
points at a file or folder that exists, in docs/ or elsewhere in the repository, is fine;
any other is a WARNING, which fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repo_links")

FENCED = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def broken_links(markdown: str, page_file: Path, repo: Path) -> list[str]:
    """The relative link targets in ``markdown`` (read from ``page_file``) that do not exist."""
    text = INLINE_CODE.sub("", FENCED.sub("", markdown))
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue  # a URL, an anchor on this page, or a site-absolute path
        path = (page_file.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(repo) or not path.exists():
            out.append(target)
    return out


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    for target in broken_links(markdown, docs / page.file.src_path, docs.parent):
        log.warning("Doc file '%s' links to '%s', which is neither a page nor a file of the "
                    "repository", page.file.src_path, target)
    return markdown
