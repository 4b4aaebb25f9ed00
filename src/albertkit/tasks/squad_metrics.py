"""The official SQuAD v1.1 and v2.0 metrics, written from their definitions.

Definitions (the evaluation scripts distributed with SQuAD, ``evaluate-v1.1.py`` and
``evaluate-v2.0.py``, Rajpurkar et al. 2016 / 2018):

* answer normalisation: lower-case, delete every character of ``string.punctuation`` (ASCII
  punctuation only; Unicode punctuation such as "—" or "“" is kept), delete the whole words
  ``a``/``an``/``the``, collapse runs of whitespace to one space;
* exact match (EM): normalised prediction == normalised gold answer;
* F1: harmonic mean of precision and recall over the *multiset* of normalised tokens
  (whitespace split) common to prediction and gold answer;
* each question scores the maximum over its gold answers; totals are percentages.

v2.0 only:

* gold answers whose normalisation is empty are dropped; a question left without gold
  answers (unanswerable) has the single gold answer ``""``, so an empty prediction on an
  unanswerable question scores EM = F1 = 1, and F1 is 1 exactly when both token lists are
  empty, 0 when only one is;
* ``HasAns_*`` / ``NoAns_*`` break the scores down by answerability;
* with no-answer probabilities (``na_prob_file``), a prediction whose probability exceeds
  ``na_prob_thresh`` (default 1.0) is replaced by "no answer", and a threshold search over
  the probabilities reports ``best_exact``/``best_f1`` and their thresholds.

Departures from the scripts, on purpose: a question without a prediction is an error that
names it (the scripts print a note and score it 0), and v1.1 scoring reports the same
per-answerability counts when asked.

Japanese and Chinese (``language="ja"`` / ``"zh"``, any region or script subtag): words are
not separated by spaces, so a whitespace split makes every answer one token and F1 collapses
to exact match. For these languages the answers are scored at character level, the
convention of the CMRC 2018 evaluation script (``cmrc2018_evaluate.py``, Cui et al. 2019;
DRCD, Shao et al. 2018, is scored with the same script):

* normalisation: lower-case, delete punctuation (ASCII ``string.punctuation``, every Unicode
  punctuation character such as "。", "、", "「", "」", and the full-width forms of ASCII
  punctuation such as "～" and "＋") and all whitespace; no article rule;
* tokens: each character is a token, except that a run of letters or digits of an alphabetic
  script (Latin, Greek, Cyrillic) or of digits stays one token, ended by whitespace or
  punctuation (CMRC's ``mixed_segmentation`` keeps English words whole the same way), so
  "iphone" is one token and "東京" two; EM compares the tokens joined without spaces;
* EM: the normalised strings are equal; F1: SQuAD's multiset overlap over these tokens.
  CMRC's script counts the longest common *substring* of the token lists instead; the two
  differ only when the common characters are not contiguous in one of the answers. The
  multiset keeps one F1 formula for every language.

Every other language (and ``language=None``) is scored exactly as the official scripts do.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albertkit.errors import SquadEvalError
from albertkit.fileio import read_json

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)

CHARACTER_LEVEL_LANGUAGES = frozenset({"ja", "zh"})
"""Languages whose answers are scored per character (the CMRC 2018 / DRCD convention)."""
_WORD_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC", "DIGIT", "FULLWIDTH LATIN", "FULLWIDTH DIGIT")


def character_level(language: str | None) -> bool:
    """Whether answers in ``language`` (a code such as ``"ja"`` or ``"zh-Hant"``; None for
    the official English rules) are scored per character."""
    if not language:
        return False
    return language.replace("_", "-").split("-")[0].lower() in CHARACTER_LEVEL_LANGUAGES


def _is_punctuation(ch: str) -> bool:
    return (ch in _PUNCTUATION or unicodedata.category(ch).startswith("P")
            or unicodedata.normalize("NFKC", ch) in _PUNCTUATION)


def _in_word(ch: str) -> bool:
    """A letter or digit of a script that spaces its words (kept together as one token)."""
    return ch.isalnum() and unicodedata.name(ch, "").startswith(_WORD_SCRIPTS)


# --------------------------------------------------------------------------- definitions
def normalize_answer(text: str, *, language: str | None = None) -> str:
    """Lower-case, strip ASCII punctuation, drop articles, collapse whitespace; for Japanese
    and Chinese: lower-case, strip all punctuation and whitespace (see the module notes)."""
    if character_level(language):
        return "".join(_character_tokens(text))
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str, *, language: str | None = None) -> list[str]:
    """Whitespace tokens of the normalised answer (``[]`` for an empty answer); for Japanese
    and Chinese its characters, a run of Latin/Greek/Cyrillic letters or digits as one.

    Example:
        >>> answer_tokens("東京タワー（333m）", language="ja")
        ['東', '京', 'タ', 'ワ', 'ー', '333m']
    """
    if not text:
        return []
    if character_level(language):
        return _character_tokens(text)
    return normalize_answer(text, language=language).split()


def _character_tokens(text: str) -> list[str]:
    """Lower-cased tokens without punctuation or whitespace: each character, except that a
    run of letters/digits of a spaced script is one token (whitespace and punctuation end
    it)."""
    tokens: list[str] = []
    word = ""
    for ch in text.lower():
        if _in_word(ch):
            word += ch
            continue
        if word:
            tokens.append(word)
            word = ""
        if not ch.isspace() and not _is_punctuation(ch):
            tokens.append(ch)
    if word:
        tokens.append(word)
    return tokens


def exact_match(prediction: str, gold: str, *, language: str | None = None) -> int:
    """1 if the normalised strings are equal, else 0."""
    return int(normalize_answer(prediction, language=language)
               == normalize_answer(gold, language=language))


def f1(
    prediction: str, gold: str, empty_matches_empty: bool = True, *, language: str | None = None
) -> float:
    """Token-multiset F1 between normalised prediction and gold answer.

    ``empty_matches_empty`` is the v2.0 rule (two empty token lists score 1, one empty list
    scores 0). v1.1's script has no such rule: an empty list shares no token and scores 0.
    ``language`` ``"ja"``/``"zh"`` counts characters (:func:`answer_tokens`).
    """
    pred_toks = answer_tokens(prediction, language=language)
    gold_toks = answer_tokens(gold, language=language)
    if empty_matches_empty and (not pred_toks or not gold_toks):
        return float(pred_toks == gold_toks)
    common = collections.Counter(pred_toks) & collections.Counter(gold_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_toks)
    recall = same / len(gold_toks)
    return 2.0 * precision * recall / (precision + recall)


# --------------------------------------------------------------------------- gold data
@dataclass(frozen=True)
class GoldQuestion:
    """Gold answers of one question, as the metric sees them."""

    qid: str
    answers: tuple[str, ...]  # v2: non-empty after normalisation, or ("",) when unanswerable

    @property
    def has_answer(self) -> bool:
        return any(self.answers)


def gold_from_dataset(
    dataset: Mapping[str, Any],
    version: str,
    source: str = "<data>",
    *,
    language: str | None = None,
) -> dict[str, GoldQuestion]:
    """Question id -> gold answers, from a parsed official SQuAD JSON (``{"data": [...]}``)."""
    if not isinstance(dataset, Mapping) or not isinstance(dataset.get("data"), list):
        raise SquadEvalError(f"{source}: expected a JSON object with a 'data' list")
    gold: dict[str, GoldQuestion] = {}
    for a, article in enumerate(dataset["data"]):
        for p, para in enumerate(_field(article, "paragraphs", f"{source}: data[{a}]")):
            for q, qa in enumerate(_field(para, "qas", f"{source}: data[{a}].paragraphs[{p}]")):
                where = f"{source}: data[{a}].paragraphs[{p}].qas[{q}]"
                qid = str(_field(qa, "id", where))
                texts = [
                    str(_field(ans, "text", f"{where} (id={qid})"))
                    for ans in _field(qa, "answers", f"{where} (id={qid})")
                ]
                if version == "2.0":
                    texts = [t for t in texts if normalize_answer(t, language=language)] or [""]
                elif not texts:
                    raise SquadEvalError(f"{where} (id={qid}): v1.1 question without answers")
                if qid in gold:
                    raise SquadEvalError(f"{where}: duplicate question id {qid!r}")
                gold[qid] = GoldQuestion(qid, tuple(texts))
    return gold


def _field(record: Any, name: str, where: str) -> Any:
    if not isinstance(record, Mapping) or name not in record:
        raise SquadEvalError(f"{where}: missing field {name!r}")
    return record[name]


def detect_version(dataset: Mapping[str, Any]) -> str:
    """'2.0' if the file says so or any question carries ``is_impossible``, else '1.1'."""
    declared = str(dataset.get("version", "")) if isinstance(dataset, Mapping) else ""
    if declared.lstrip("v").startswith("2"):
        return "2.0"
    for article in dataset.get("data", []) or []:
        for para in article.get("paragraphs", []) if isinstance(article, Mapping) else []:
            for qa in para.get("qas", []) if isinstance(para, Mapping) else []:
                if isinstance(qa, Mapping) and "is_impossible" in qa:
                    return "2.0"
    return "1.1"


# --------------------------------------------------------------------------- scoring
def _check_predictions(
    gold: Mapping[str, GoldQuestion], predictions: Mapping[str, str], what: str = "prediction"
) -> None:
    missing = [qid for qid in gold if qid not in predictions]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise SquadEvalError(f"missing {what} for question id {missing[0]!r}{more}")


def raw_scores(
    gold: Mapping[str, GoldQuestion],
    predictions: Mapping[str, str],
    version: str,
    *,
    language: str | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """Per-question EM and F1 (0/1 and [0, 1]), max over gold answers."""
    _check_predictions(gold, predictions)
    empty_rule = version == "2.0"
    exact, f1s = {}, {}
    for qid, g in gold.items():
        pred = predictions[qid]
        if not isinstance(pred, str):
            raise SquadEvalError(f"prediction for question id {qid!r} is not a string: {pred!r}")
        exact[qid] = float(max(exact_match(pred, a, language=language) for a in g.answers))
        f1s[qid] = max(
            f1(pred, a, empty_matches_empty=empty_rule, language=language) for a in g.answers
        )
    return exact, f1s


def apply_no_answer_threshold(
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
    threshold: float,
) -> dict[str, float]:
    """Scores after replacing predictions with ``na_prob > threshold`` by "no answer"."""
    return {
        qid: (float(not has_answer[qid]) if na_probs[qid] > threshold else s)
        for qid, s in scores.items()
    }


def threshold_sweep(
    gains: Mapping[str, float], na_probs: Mapping[str, float], start: float
) -> list[tuple[str, float]]:
    """The no-answer threshold search, one question at a time: the ONE implementation.

    Start from "answer nothing" (total ``start``: every unanswerable question right), then
    lower the bar one question at a time in increasing ``na_prob`` order (stable for
    ties); answering question ``q`` changes the total by ``gains[q]``. Returns each
    question with the running total once it is answered.
    """
    total = start
    out = []
    for qid in sorted(gains, key=lambda q: na_probs[q]):
        total += gains[qid]
        out.append((qid, total))
    return out


def find_best_threshold(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """Best total score (percent) over no-answer thresholds, and that threshold.

    :func:`threshold_sweep` with the official script's gains: an answerable question gains
    its raw score, an unanswerable one loses 1 if a non-empty answer was predicted. The
    best running total and the ``na_prob`` where it was reached are returned (threshold 0.0
    when answering nothing is best). As in the official script, questions with equal
    ``na_prob`` are still taken one at a time (stable order).
    """
    gains = {
        q: scores[q] if has_answer[q] else (-1.0 if predictions[q] else 0.0) for q in scores
    }
    best = float(sum(1 for q in scores if not has_answer[q]))
    best_thresh = 0.0
    for qid, total in threshold_sweep(gains, na_probs, best):
        if total > best:
            best, best_thresh = total, float(na_probs[qid])
    return 100.0 * best / max(len(scores), 1), best_thresh


def threshold_curve(
    gold: Mapping[str, GoldQuestion],
    best_non_null: Mapping[str, str],
    null_odds: Mapping[str, float],
    *,
    language: str | None = None,
) -> dict[str, list[float]]:
    """EM and F1 (percent) when "no answer" is predicted for ``null_odds > threshold``.

    ``best_non_null`` holds each question's best non-empty answer. At a threshold ``t`` a
    question is answered with its best span when ``null_odds <= t`` (the rule of
    :func:`apply_no_answer_threshold`) and scores as a no-answer otherwise. The curve is
    :func:`threshold_sweep` evaluated at every distinct ``null_odds`` value (where it can
    change; questions with equal odds are taken together), preceded by "answer nothing".
    Returns ``{"threshold", "exact", "f1", "answered"}`` lists (``answered``: percent of
    questions answered at that threshold).
    """
    _check_predictions(gold, null_odds, what="null odds value")
    preds = {q: best_non_null.get(q, "") for q in gold}
    exact_raw, f1_raw = raw_scores(gold, preds, "2.0", language=language)
    odds = {q: float(null_odds[q]) for q in gold}
    no_answer = {q: 0.0 if g.has_answer else 1.0 for q, g in gold.items()}
    start = sum(no_answer.values())  # answer nothing: only unanswerable questions score
    em = threshold_sweep({q: exact_raw[q] - no_answer[q] for q in gold}, odds, start)
    f1s = threshold_sweep({q: f1_raw[q] - no_answer[q] for q in gold}, odds, start)
    n = max(len(gold), 1)
    out: dict[str, list[float]] = {"threshold": [], "exact": [], "f1": [], "answered": []}
    if em:
        lowest = odds[em[0][0]]
        out["threshold"].append(lowest - max(1.0, 0.05 * abs(lowest)))
        out["exact"].append(100.0 * start / n)
        out["f1"].append(100.0 * start / n)
        out["answered"].append(0.0)
    for i, ((qid, em_total), (_, f1_total)) in enumerate(zip(em, f1s, strict=True)):
        t = odds[qid]
        if i + 1 < len(em) and odds[em[i + 1][0]] == t:
            continue  # ties: the threshold takes all questions with this value at once
        out["threshold"].append(t)
        out["exact"].append(100.0 * em_total / n)
        out["f1"].append(100.0 * f1_total / n)
        out["answered"].append(100.0 * (i + 1) / n)
    return out


def _mean_percent(scores: Mapping[str, float], qids: Iterable[str]) -> float:
    qids = list(qids)
    return 100.0 * sum(scores[q] for q in qids) / len(qids) if qids else 0.0


def evaluate_v1(
    gold: Mapping[str, GoldQuestion],
    predictions: Mapping[str, str],
    *,
    language: str | None = None,
) -> dict[str, float]:
    """``{"exact_match", "f1"}`` as printed by ``evaluate-v1.1.py``."""
    exact, f1s = raw_scores(gold, predictions, "1.1", language=language)
    return {"exact_match": _mean_percent(exact, gold), "f1": _mean_percent(f1s, gold)}


def evaluate_v2(
    gold: Mapping[str, GoldQuestion],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
    *,
    language: str | None = None,
) -> dict[str, float]:
    """The keys printed by ``evaluate-v2.0.py``, in its order.

    ``exact``, ``f1``, ``total``, ``HasAns_*`` / ``NoAns_*`` (when such questions exist) and,
    when ``na_probs`` is given, ``best_exact``, ``best_exact_thresh``, ``best_f1``,
    ``best_f1_thresh``.
    """
    have_probs = na_probs is not None
    if have_probs:
        _check_predictions(gold, na_probs, what="no-answer probability")
        na = {q: float(na_probs[q]) for q in gold}
    else:
        na = {q: 0.0 for q in gold}
    has_answer = {q: g.has_answer for q, g in gold.items()}
    exact_raw, f1_raw = raw_scores(gold, predictions, "2.0", language=language)
    exact = apply_no_answer_threshold(exact_raw, na, has_answer, na_prob_thresh)
    f1s = apply_no_answer_threshold(f1_raw, na, has_answer, na_prob_thresh)

    out: dict[str, float] = {
        "exact": _mean_percent(exact, gold),
        "f1": _mean_percent(f1s, gold),
        "total": len(gold),
    }
    has = [q for q in gold if has_answer[q]]
    no = [q for q in gold if not has_answer[q]]
    for prefix, qids in (("HasAns", has), ("NoAns", no)):
        if qids:
            out[f"{prefix}_exact"] = _mean_percent(exact, qids)
            out[f"{prefix}_f1"] = _mean_percent(f1s, qids)
            out[f"{prefix}_total"] = len(qids)
    if have_probs:
        preds = {q: predictions[q] for q in gold}
        out["best_exact"], out["best_exact_thresh"] = find_best_threshold(
            preds, exact_raw, na, has_answer
        )
        out["best_f1"], out["best_f1_thresh"] = find_best_threshold(preds, f1_raw, na, has_answer)
    return out


def evaluate(
    dataset: Mapping[str, Any],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    version: str | None = None,
    na_prob_thresh: float = 1.0,
    source: str = "<data>",
    *,
    language: str | None = None,
) -> dict[str, float]:
    """Score ``predictions`` (question id -> answer text) against a parsed SQuAD JSON.

    ``version`` ``None`` detects it from the file. v1.1 returns ``exact_match``/``f1``
    (``na_probs`` is then an error: the v1.1 script has no threshold), v2.0 the v2 keys.
    ``language`` ``"ja"``/``"zh"`` scores characters (the module notes); None, English
    and every other language: the official definitions.

    Example:
        >>> data = {"version": "1.1", "data": [{"paragraphs": [{"context": "x",
        ...     "qas": [{"id": "q1", "question": "?", "answers": [{"text": "The cat",
        ...     "answer_start": 0}]}]}]}]}
        >>> evaluate(data, {"q1": "cat"})
        {'exact_match': 100.0, 'f1': 100.0}
    """
    version = version or detect_version(dataset)
    if version not in ("1.1", "2.0"):
        raise SquadEvalError(f"unknown SQuAD version {version!r} (expected '1.1' or '2.0')")
    gold = gold_from_dataset(dataset, version, source, language=language)
    if version == "1.1":
        if na_probs is not None:
            raise SquadEvalError(
                f"no-answer probabilities are a SQuAD v2.0 feature; {source} is v1.1"
            )
        return evaluate_v1(gold, predictions, language=language)
    return evaluate_v2(gold, predictions, na_probs, na_prob_thresh, language=language)


def load_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file; errors (:class:`SquadEvalError`) name the file, line and column."""
    return read_json(path, f"{what} file", SquadEvalError)


def evaluate_squad_files(
    data_file: str | Path,
    predictions_file: str | Path,
    na_prob_file: str | Path | None = None,
    version: str | None = None,
    na_prob_thresh: float = 1.0,
    *,
    language: str | None = None,
) -> dict[str, float]:
    """:func:`evaluate` on files in the official formats (what ``evaluate-squad`` runs)."""
    dataset = load_json(data_file, "data")
    predictions = load_json(predictions_file, "predictions")
    if not isinstance(predictions, dict):
        raise SquadEvalError(f"{predictions_file}: expected a JSON object id -> answer text")
    na_probs = None
    if na_prob_file is not None:
        na_probs = load_json(na_prob_file, "no-answer probability")
        if not isinstance(na_probs, dict):
            raise SquadEvalError(f"{na_prob_file}: expected a JSON object id -> number")
        for qid, v in na_probs.items():
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise SquadEvalError(
                    f"{na_prob_file}: value for question id {qid!r} is not a number: {v!r}"
                )
    return evaluate(dataset, predictions, na_probs, version, na_prob_thresh,
                    source=str(data_file), language=language)
