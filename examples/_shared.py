"""Helpers shared by the example scripts: command-line flags, output folders, small fixtures.

Not an example itself (the leading underscore keeps it out of the example test). Nothing
here downloads anything: the sample corpus is English prose that ships with Python
(``pydoc_data.topics``, the text behind ``help()``), and the SQuAD / GLUE fixtures are a
few hand-written records, enough to show every step end to end on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
CONFIGS = EXAMPLES / "configs"


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the flags every example has (``--tiny``, ``--out``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tiny", action="store_true",
                   help="tiny sizes and a few steps: finishes in about a minute on a CPU")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default: runs/examples/<script name>, or under "
                        "$ALBERTKIT_EXAMPLE_OUT when that is set)")
    return p


def out_dir(args: argparse.Namespace, script: str) -> Path:
    """Where an example writes: ``--out``, else ``$ALBERTKIT_EXAMPLE_OUT/<name>``, else
    ``runs/examples/<name>`` under the current directory."""
    name = Path(script).stem
    if args.out is not None:
        path = args.out
    elif os.environ.get("ALBERTKIT_EXAMPLE_OUT"):
        path = Path(os.environ["ALBERTKIT_EXAMPLE_OUT"]) / name
    else:
        path = Path("runs") / "examples" / name
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def quiet_tensorflow() -> None:
    """Hide TensorFlow's C++ start-up chatter (set before TensorFlow is imported)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# --------------------------------------------------------------------------- text
def python_docs_documents(limit: int | None = None) -> list[str]:
    """Documents of English prose from Python's own ``help()`` topics, one string each."""
    from pydoc_data import topics

    docs = []
    for name in sorted(topics.topics):
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", topics.topics[name])]
        # keep running prose: no indented code, no grammar rules
        prose = [p for p in paragraphs if len(p) > 60 and "::=" not in p and ">>>" not in p]
        if prose:
            docs.append(" ".join(prose))
    return docs[:limit] if limit else docs


def write_sample_corpus(path: Path, limit: int | None = None) -> Path:
    """A text file with one document per line (the layout ``prepare-data`` reads by default)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(python_docs_documents(limit)) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- SQuAD fixture
_SQUAD_ARTICLES = [
    ("Harbour_Lighthouse",
     "The harbour lighthouse was built in 1852 by the engineer Clara Voss. Its first lamp "
     "burned whale oil, and in 1901 the keepers changed to kerosene. The white tower is 28 "
     "metres tall, and its light can be seen from 17 nautical miles away. The station was "
     "automated in 1971, and the last keeper, Jonas Hale, moved to the town of Penmarrow.",
     [("When was the harbour lighthouse built?", "1852"),
      ("Who built the harbour lighthouse?", "Clara Voss"),
      ("How tall is the tower?", "28 metres"),
      ("Who was the last keeper?", "Jonas Hale"),
      ("Who painted the tower red?", None),
      ("When was the lighthouse demolished?", None)]),
    ("River_Mill",
     "The old mill on the river Tarn ground wheat for the valley from 1790 until 1935. Its "
     "wooden wheel is 6 metres across and was rebuilt by the carpenter Owen Pryce in 1880. "
     "After the mill closed, the building was used as a school for twenty years. Today it is "
     "a bakery that sells bread made from flour ground on the old stones.",
     [("Which river is the mill on?", "Tarn"),
      ("How wide is the wooden wheel?", "6 metres"),
      ("Who rebuilt the wheel?", "Owen Pryce"),
      ("What is the building today?", "a bakery"),
      ("Who owns the bakery?", None)]),
    ("Glass_Observatory",
     "The glass observatory on Mount Arden opened in 1964. Its main telescope has a mirror "
     "2.4 metres wide, made in the workshop of Ines Moreau. Astronomers at the observatory "
     "discovered the comet Arden-Lutz in 1988. Visitors can climb to the dome on the first "
     "Sunday of every month.",
     [("When did the observatory open?", "1964"),
      ("How wide is the mirror?", "2.4 metres"),
      ("Which comet was discovered there?", "Arden-Lutz"),
      ("When can visitors climb to the dome?", "the first Sunday of every month"),
      ("How much does a ticket cost?", None)]),
]


def write_squad_fixture(path: Path, version: str = "2.0") -> Path:
    """A small SQuAD-format file (official JSON layout). v1.1 drops the unanswerable questions."""
    data = []
    for n, (title, context, questions) in enumerate(_SQUAD_ARTICLES):
        qas = []
        for i, (question, answer) in enumerate(questions):
            if answer is None and version == "1.1":
                continue
            qa = {"id": f"q{n}-{i}", "question": question, "answers": []}
            if answer is not None:
                start = context.index(answer)
                qa["answers"] = [{"text": answer, "answer_start": start}]
            if version == "2.0":
                qa["is_impossible"] = answer is None
            qas.append(qa)
        data.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": f"v{version}", "data": data}, indent=1),
                    encoding="utf-8")
    return path


def squad_texts() -> list[str]:
    """Every context and question of the SQuAD fixture (for the tokenizer)."""
    out = []
    for _, context, questions in _SQUAD_ARTICLES:
        out.append(context)
        out += [q for q, _ in questions]
    return out


# --------------------------------------------------------------------------- GLUE fixture
_SST2 = [
    ("a warm , funny and deeply moving film .", 1),
    ("the plot is thin and the jokes fall flat .", 0),
    ("one of the best performances of the year .", 1),
    ("a tedious , joyless slog from start to finish .", 0),
    ("the actors are wonderful and the story is touching .", 1),
    ("i wanted my two hours back .", 0),
    ("a clever , charming and beautifully shot comedy .", 1),
    ("dull characters and a script without a single surprise .", 0),
    ("the music is lovely and the ending made me smile .", 1),
    ("badly edited , badly acted and far too long .", 0),
    ("a delightful film for the whole family .", 1),
    ("the worst film i have seen in years .", 0),
    ("smart , tender and full of life .", 1),
    ("nothing works in this boring mess .", 0),
    ("a brave and beautiful story , told with care .", 1),
    ("the dialogue is clumsy and the pacing is awful .", 0),
]


def write_sst2_fixture(path: Path) -> Path:
    """A small SST-2-style TSV file (GLUE's layout: ``sentence<TAB>label`` with a header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["sentence\tlabel"] + [f"{s}\t{y}" for s, y in _SST2]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sst2_texts() -> list[str]:
    return [s for s, _ in _SST2]


def setup_logging() -> None:
    """albertkit's console logging, as the `albertkit` command sets it up (INFO lines)."""
    from albertkit.training import setup_console_logging

    setup_console_logging(debug=False)
