"""benchmarks/sentence_splitters.py: albertkit's choice per language against pysbd on the
hand-checked sets (the other libraries are optional and skipped when absent)."""

from __future__ import annotations

import json


def test_the_chosen_splitters_score_at_least_as_well(load_script, tmp_path):
    script = load_script("sentence_splitters")
    out = tmp_path / "rows.json"
    assert script.main(["--json", str(out)]) == 0
    rows = {(r["language"], r["splitter"]): r for r in json.loads(out.read_text())}
    for code in ("ja", "zh"):
        ours = rows[(code, "albertkit (pysbd + closers)")]
        assert ours["total"] >= 200 and ours["found"] / ours["total"] >= 0.95
        assert ours["found"] >= rows[(code, "pysbd")]["found"]
    # English keeps albertkit's rules: no library does better on its cases
    english = rows[("en", "albertkit rules")]["found"]
    assert all(r["found"] <= english for (code, _), r in rows.items() if code == "en")
