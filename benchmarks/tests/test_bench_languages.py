"""bench_languages.py runs end to end on a small corpus and reports what it promises (the
figures themselves are for a quiet machine, not for a test)."""

from __future__ import annotations


def test_small_run_reports_both_languages_side_by_side(load_script, tmp_path, capsys):
    bench = load_script("bench_languages")
    results = bench.main(["--work", str(tmp_path), "--mb", "0.05", "--dupe-factor", "1",
                          "--en-vocab", "400", "--ja-vocab", "580"])
    split, ja, en, summary = results
    assert (ja["language"], ja["segmenter"]) == ("ja", "fugashi")
    assert (en["language"], en["segmenter"]) == ("en", "whitespace")
    assert 0.04 < ja["mb"] < 0.06 and 0.04 < en["mb"] < 0.06
    assert ja["cpu_s_per_mb"] > 0 and en["cpu_s_per_mb"] > 0
    assert summary["ja_over_en_cpu_per_mb"] == round(ja["cpu_s_per_mb"] / en["cpu_s_per_mb"], 2)
    assert summary["cpu"] and split["with_segmenter_cpu_s_per_mb"] > 0
    assert capsys.readouterr().out.count("\n") == 4  # one JSON line each
