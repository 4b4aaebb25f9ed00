"""A small synthetic English tagging set (PER, LOC, ORG) and a tokenizer for it.

No data set can be downloaded here, so sentences come from templates filled with names from
fixed lists. Every list is split once: the training sentences use one part, the held-out
(dev) sentences the other, so no entity string of the dev set occurs in training and a
model must tag names it has never seen, from their context and form. Everything is seeded:
the same call writes the same files.

    python -m albertkit_tagging.example example/data   # train.jsonl, dev.jsonl, tokenizer/

The tokenizer (SentencePiece, case kept) is trained on the training sentences plus one line
of the alphabet, so that every letter of an unseen name has a piece.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

FIRST = ["Alice", "Bruno", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ingrid", "Jonas", "Keiko", "Lars", "Maya", "Nikolai", "Olga", "Pavel", "Quinn", "Rosa", "Stefan", "Tamara", "Umar", "Vera", "Wim", "Xenia", "Yusuf", "Zora", "Anton", "Bianca", "Cyril", "Dalia", "Emil", "Fiona", "Gustav", "Hana", "Ivo", "Jana", "Karim", "Lena", "Marco", "Nadia", "Oskar", "Petra", "Rafael", "Sofia", "Tomas", "Ursula", "Viktor", "Wanda", "Yara", "Zeno"]
LAST = ["Abbott", "Berger", "Castillo", "Dorsey", "Eklund", "Fischer", "Gallo", "Horvath", "Ibsen", "Janssen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quist", "Rinaldi", "Schulz", "Tanaka", "Ulrich", "Varga", "Weber", "Yilmaz", "Zeller", "Almeida", "Brandt", "Costa", "Duval", "Esposito", "Ferreira", "Gruber", "Haas", "Iversen", "Jovanovic", "Keller", "Larsen", "Meyer", "Nilsen", "Ortiz", "Pereira", "Romano", "Silva", "Torres", "Vogel", "Wagner", "Young", "Ziegler", "Baker", "Carter"]
PLACES = ["Arlington", "Brackwater", "Corvallis", "Dunmore", "Eastport", "Fairhaven", "Glenrock", "Harrowgate", "Ironbridge", "Jasperville", "Kingsford", "Lakemont", "Millbrook", "Northfield", "Oakridge", "Pinecrest", "Queensbury", "Riverton", "Stonehaven", "Thornbury", "Upton", "Valemont", "Westfield", "Yarmouth", "Port Elston", "New Harlow", "San Verano", "Lake Tessa", "Mount Carrow", "East Linden", "Fort Ashby", "Saint Orla", "Glen Marra", "North Vale", "Little Brook", "Old Kesting"]
ORG_STEMS = ["Acme", "Borealis", "Cobalt", "Delta", "Everline", "Fjord", "Granite", "Helix", "Ionic", "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Orion", "Pioneer", "Quartz", "Redwood", "Summit", "Titan", "Umbra", "Vertex", "Willow", "Zenith", "Apex", "Beacon", "Cascade", "Dynamo", "Ember", "Falcon"]
ORG_SUFFIXES = ["Corp", "Bank", "Group", "Labs", "Airlines", "Motors", "Foods", "Media", "Systems", "Energy"]
# Syllables the generated names are made of: with hundreds of names per list a model cannot
# memorise them and has to read the context (and the shape of a name).
SYLLABLES = ["ka", "lo", "mi", "ra", "ve", "san", "dor", "el", "ti", "na", "bru", "ge", "ha", "ros", "va", "li", "mar", "fen", "du", "ort", "sel", "qui", "ber", "ta", "zo", "ni", "lan", "cor", "pe", "ask", "wen", "hol", "tur", "bi", "ga"]
LAST_ENDINGS = ("", "", "son", "ez", "ski", "ov", "man", "berg", "ini")
PLACE_ENDINGS = ("ton", "ford", "burg", "ville", "port", "field", "dale", "mouth")
PLACE_PREFIXES = ("Port", "New", "Lake", "Mount", "East", "North", "Saint", "Fort")

TEMPLATES = (
    "{PER} was born in {LOC} .",
    "{PER} works for {ORG} in {LOC} .",
    "{ORG} opened a new office in {LOC} last week .",
    "Yesterday {PER} met {PER} at the {ORG} headquarters .",
    "The mayor of {LOC} , {PER} , spoke on Monday .",
    "{ORG} hired {PER} as its new chief executive .",
    "Shares of {ORG} rose after {PER} resigned .",
    "{PER} moved from {LOC} to {LOC} in the spring .",
    "According to {ORG} , prices in {LOC} fell sharply .",
    "She travelled to {LOC} with {PER} .",
    "{PER} said the talks with {ORG} went well .",
    "The report by {ORG} was published on Friday .",
    "Flights from {LOC} to {LOC} were cancelled .",
    "Nobody expected the storm to last so long .",
    "{PER} and {PER} founded {ORG} in {LOC} .",
    "Police in {LOC} are looking for {PER} .",
    "{ORG} agreed to buy {ORG} for two billion dollars .",
    "A spokesman for {ORG} declined to comment .",
    "{PER} scored twice as {LOC} won the final .",
    "The new bridge in {LOC} will open next year .",
    "Talks between {ORG} and the unions in {LOC} failed .",
    "{PER} , a lawyer from {LOC} , joined {ORG} .",
    "In {LOC} , {PER} opened a small bakery .",
    "We will meet again after the holidays .",
)


def generated(kind: str, count: int, rng: random.Random) -> list[str]:
    """``count`` distinct made-up names of ``kind`` (first, last, place, org)."""
    out: set[str] = set()
    while len(out) < count:
        stem = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 2, 3))))
        if kind == "last":
            stem += rng.choice(LAST_ENDINGS)
        elif kind == "place":
            stem += rng.choice(PLACE_ENDINGS)
        name = stem.capitalize()
        if kind == "place" and rng.random() < 0.25:
            name = f"{rng.choice(PLACE_PREFIXES)} {name}"
        out.add(name)
    return sorted(out)


def name_lists(rng: random.Random) -> list[list[str]]:
    """The first names, last names, places and organisation stems: the fixed lists plus
    generated ones (each list without duplicates)."""
    fixed = (FIRST, LAST, PLACES, ORG_STEMS)
    kinds = ("first", "last", "place", "org")
    counts = (400, 400, 300, 300)
    return [sorted(set(f) | set(generated(k, n, rng)))
            for f, k, n in zip(fixed, kinds, counts, strict=True)]


def split_names(names: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    """Two disjoint parts of ``names`` (two thirds, one third), shuffled by ``rng``."""
    names = list(names)
    rng.shuffle(names)
    cut = (2 * len(names)) // 3
    return names[:cut], names[cut:]


class Names:
    """The names one split draws from."""

    def __init__(self, first, last, places, stems) -> None:
        self.first, self.last, self.places, self.stems = first, last, places, stems

    def entity(self, kind: str, rng: random.Random) -> list[str]:
        if kind == "PER":
            if rng.random() < 0.7:
                return [rng.choice(self.first), rng.choice(self.last)]
            return [rng.choice(self.first if rng.random() < 0.5 else self.last)]
        if kind == "LOC":
            return rng.choice(self.places).split()
        return [rng.choice(self.stems), rng.choice(ORG_SUFFIXES)]


def sentences(names: Names, count: int, rng: random.Random) -> list[dict[str, list[str]]]:
    """``count`` tagged sentences from the templates and ``names``."""
    out = []
    for _ in range(count):
        tokens: list[str] = []
        tags: list[str] = []
        for word in rng.choice(TEMPLATES).split():
            if word in ("{PER}", "{LOC}", "{ORG}"):
                kind = word[1:-1]
                words = names.entity(kind, rng)
                tokens += words
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(words) - 1)
            else:
                tokens.append(word)
                tags.append("O")
        out.append({"tokens": tokens, "tags": tags})
    return out


def entity_strings(rows: list[dict[str, list[str]]]) -> set[str]:
    """Every entity of ``rows`` as its words joined by spaces."""
    found: set[str] = set()
    for row in rows:
        current: list[str] = []
        for token, tag in zip(row["tokens"], row["tags"], strict=True):
            if tag.startswith("I-") and current:
                current.append(token)
                continue
            if current:
                found.add(" ".join(current))
            current = [token] if tag != "O" else []
        if current:
            found.add(" ".join(current))
    return found


def make_dataset(seed: int = 0, train: int = 3000, dev: int = 400
                 ) -> tuple[list[dict[str, list[str]]], list[dict[str, list[str]]]]:
    """The training and dev sentences (their entity strings are disjoint)."""
    rng = random.Random(seed)
    parts = [split_names(names, rng) for names in name_lists(rng)]
    in_train = set().union(*(p[0] for p in parts))  # a first name may be a last name too
    train_names = Names(*(p[0] for p in parts))
    dev_names = Names(*([n for n in p[1] if n not in in_train] for p in parts))
    train_rows = sentences(train_names, train, rng)
    dev_rows = sentences(dev_names, dev, rng)
    shared = entity_strings(train_rows) & entity_strings(dev_rows)
    assert not shared, f"train and dev share entity strings: {sorted(shared)[:5]}"
    return train_rows, dev_rows


def write_example(out_dir: str | Path, seed: int = 0, train: int = 3000, dev: int = 400,
                  vocab_size: int = 256) -> Path:
    """Write ``train.jsonl``, ``dev.jsonl`` and ``tokenizer/`` into ``out_dir``."""
    from albertkit.data import TokenizerConfig, train_tokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train_rows, dev_rows = make_dataset(seed, train, dev)
    for name, rows in (("train.jsonl", train_rows), ("dev.jsonl", dev_rows)):
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (out / name).write_text(text, encoding="utf-8")
    alphabet = " ".join("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    text = [" ".join(row["tokens"]) for row in train_rows] + [alphabet]
    train_tokenizer(None, out / "tokenizer",
                    TokenizerConfig(vocab_size=vocab_size, lowercase=False, num_threads=1,
                                    seed=seed),
                    sentences=text, overwrite=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="where train.jsonl, dev.jsonl, tokenizer/ go")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=3000, help="training sentences")
    parser.add_argument("--dev", type=int, default=400, help="held-out sentences")
    args = parser.parse_args(argv)
    out = write_example(args.out_dir, args.seed, args.train, args.dev)
    print(f"wrote {out}/train.jsonl ({args.train} sentences), {out}/dev.jsonl ({args.dev}), "
          f"{out}/tokenizer/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
