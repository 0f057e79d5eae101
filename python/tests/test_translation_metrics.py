"""The translation task's BLEU and chrF (repro/metrics, C++) against sacreBLEU on a fixed set of segments.

The C++ metrics are reached through `rmsnorm-repro score HYP REF`; the program is found through the
RMSNORM_REPRO environment variable (`make test-python` sets it) or in build/repro/. Both scores must
equal sacreBLEU's to the 4 decimals the program prints.
"""
import os
import pathlib
import subprocess

import pytest
import sacrebleu  # python/requirements-test.txt: a missing one fails the suite rather than skipping it

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Segments that exercise 13a's rules (punctuation, periods and commas next to digits, dashes after
# digits, &amp; escapes, <skipped>), multi-byte characters for chrF, an empty hypothesis, a perfect
# match, and German of the kind the task translates.
HYPOTHESES = [
    "Ich habe am ursprünglichen Entwurf ein paar Änderungen vorgenommen.",
    "Das kostet 1,000.50 Euro, nicht 3.5!",
    "Er kam um 10-11 Uhr (ungefähr) nach Hause.",
    "Tom &amp; Jerry sagten: \"Hallo\" - und gingen.",
    "",
    "Der Abbau der Ozonschicht",
    "die Sache ist gelaufen",
    "<skipped> Straße, Größe; Maß: Übel?",
    "x",
    "Ein Satz mit  mehreren   Leerzeichen , und Komma.",
    "Wir sehen uns morgen früh um 8.",
    "biologischer Abbau",
]
REFERENCES = [
    "Ich habe am ursprünglichen Entwurf ein paar Änderungen vorgenommen.",
    "Das kostet 1.000,50 Euro und nicht 3,5!",
    "Er kam gegen 10-11 Uhr nach Hause.",
    "Tom & Jerry sagten: „Hallo“ – und gingen weg.",
    "Eine Referenz ohne Hypothese.",
    "der Abbau der Ozonschicht",
    "Die Sache ist gelaufen.",
    "Straße, Größe; Maß: Übel!",
    "Ein langer Satz, zu dem die Hypothese nur einen Buchstaben hat.",
    "Ein Satz mit mehreren Leerzeichen, und Komma.",
    "Bis morgen früh um acht.",
    "biologischer Abbau",
]


def repro_program():
    path = pathlib.Path(os.environ.get("RMSNORM_REPRO", ROOT / "build" / "repro" / "rmsnorm-repro"))
    if not path.exists():
        pytest.fail(f"{path} not found: build it with `make repro-build` (or set RMSNORM_REPRO)")
    return path


def run_score(tmp_path, hypotheses, references, baseline=None):
    """`rmsnorm-repro score` on the given segments: its lines "NAME = VALUE" as a dict of strings."""
    files = []
    for name, lines in [("hyp", hypotheses), ("ref", references), ("base", baseline)]:
        if lines is not None:
            files.append(tmp_path / f"{name}.txt")
            files[-1].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = subprocess.run([str(repro_program()), "score", *map(str, files)], check=True, capture_output=True,
                         text=True).stdout
    return dict(line.split(" = ") for line in out.splitlines())


def cpp_scores(tmp_path, hypotheses, references):
    scores = run_score(tmp_path, hypotheses, references)
    return scores["BLEU"], scores["chrF"]


@pytest.mark.parametrize("subset", ["all", "first", "perfect", "no_match"])
def test_bleu_and_chrf_equal_sacrebleu(tmp_path, subset):
    pairs = list(zip(HYPOTHESES, REFERENCES))
    pairs = {"all": pairs, "first": pairs[:4], "perfect": [pairs[0], pairs[-1]], "no_match": [pairs[4], pairs[8]]}[subset]
    hypotheses, references = [h for h, _ in pairs], [r for _, r in pairs]
    bleu, chrf = cpp_scores(tmp_path, hypotheses, references)
    assert bleu == f"{sacrebleu.corpus_bleu(hypotheses, [references]).score:.4f}"
    assert chrf == f"{sacrebleu.corpus_chrf(hypotheses, [references]).score:.4f}"


def test_scores_are_not_trivial(tmp_path):
    """The fixed set scores strictly between 0 and 100, so the comparison above means something."""
    bleu, chrf = cpp_scores(tmp_path, HYPOTHESES, REFERENCES)
    assert 0.0 < float(bleu) < 100.0
    assert 0.0 < float(chrf) < 100.0


def test_paired_bootstrap_p_values_agree_with_sacrebleu(tmp_path):
    """Both draw their own 1,000 resamples, so the p-values agree up to resampling noise (about 0.015)."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    references = REFERENCES * 5
    baseline = HYPOTHESES * 5
    system = list(baseline)
    for i in (1, 6, 14, 27, 40):  # a few segments improved to the reference: a real but small difference
        system[i] = references[i]
    ours = run_score(tmp_path, system, references, baseline)
    metrics = {"BLEU": BLEU(references=[references]), "chrF2": CHRF(references=[references])}
    _, theirs = PairedTest([("baseline", baseline), ("system", system)], metrics, references=None, test_type="bs",
                           n_samples=1000)()
    for our_name, their_name in [("BLEU", "BLEU"), ("chrF", "chrF2")]:
        their_p = theirs[their_name][1].p_value
        assert 0.0 < their_p < 1.0
        assert abs(float(ours[our_name + " p"]) - their_p) < 0.05, (our_name, ours, their_p)
