"""Write a sample English corpus, one document per line, from text that ships with Python.

For trying the data how-tos (docs/howto/train-tokenizer.md, prepare-data.md) without a
corpus of your own: about 1 MB of prose from Python's help() topics and the standard
library's docstrings (the text `albertkit demo` trains on). Nothing is downloaded.

    python examples/sample_corpus.py --out corpus          # corpus/python_docs.txt
    python examples/sample_corpus.py --out corpus --tiny   # 30 documents
"""

from __future__ import annotations

import sys

import _shared


def main() -> int:
    args = _shared.parser(__doc__.splitlines()[0]).parse_args()
    out = _shared.out_dir(args, __file__)
    path = out / "python_docs.txt"
    if args.tiny:
        _shared.write_sample_corpus(path, limit=30)
    else:
        from albertkit.data import stdlib_documents

        # one document per line: the sentences of a document joined by spaces
        docs = [" ".join(sentences) for sentences in stdlib_documents()]
        path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    lines = path.read_text(encoding="utf-8").count("\n")
    print(f"{path}: {lines} documents, {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
