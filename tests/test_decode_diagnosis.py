"""Lesson 07's diagnosis (kernels_lab/topics/decode/diagnosis.py): of its three protocols, the one with a
fence and an acquire is right in weak memory and the two others are wrong, the same for a seed; the check of
a student's answer accepts the right one in its several spellings and says what to look at otherwise."""

import json
from dataclasses import asdict

import pytest

from kernels_lab.backend import BACKEND
from kernels_lab.runtime import ON_SIMULATOR
from kernels_lab.topics.decode import diagnosis as dg

pytestmark = pytest.mark.skipif(not ON_SIMULATOR, reason="weak memory on the simulator (a GPU runs it in a child)")


@pytest.fixture(scope="module")
def outcomes():
    return dg.run(0)


def _same(a, b) -> bool:  # NaN outputs compare unequal: compare the text
    return json.dumps([asdict(o) for o in a]) == json.dumps([asdict(o) for o in b])


def test_only_the_protocol_with_its_release_and_acquire_is_right(outcomes):
    by = {o.protocol: o for o in outcomes}
    assert by["B"].right and by["B"].stale_reads == {}
    for name in ("A", "C"):
        assert not by[name].right and by[name].wrong > 0 and by[name].stale_reads["acts"] > 0
        assert not by[name].gave_up and by[name].first_wrong
    assert by["C"].stale_reads.get("counters", 0) > 0 and "counters" not in by["A"].stale_reads
    shown = dg.show(outcomes).splitlines()
    assert [line.split(":")[1].split()[0] for line in shown] == ["WRONG", "right", "WRONG"]


def test_the_same_seed_gives_the_same_outcomes(outcomes):
    assert _same(dg.run(0), outcomes)


@pytest.mark.parametrize("answer", [{"A": "signal", "B": "right", "C": "wait"},
                                    {"A": "Release", "B": None, "C": "acquire"},
                                    {"A": "no fence", "B": "correct", "C": "plain load"}])
def test_the_right_diagnosis_in_its_spellings(answer, outcomes):
    verdict = dg.check(answer, outcomes)
    assert verdict.correct and str(verdict).startswith("diagnosis right: 3 of 3")


def test_a_wrong_diagnosis_says_what_to_look_at_without_a_false_hint(outcomes):
    verdict = dg.check({"A": "right", "B": "wait", "C": "signal"}, outcomes)
    text = str(verdict)
    assert not verdict.correct and "0 of 3" in text
    a, b, c = verdict.lines
    assert a.startswith("no A: it breaks") and "acts" in a and "seed(s) 0" in a
    assert b.startswith("no B: it does not break")
    assert c.startswith("no C: it breaks") and "its signal is fine; look at its wait" in c
    half = dg.check({"A": "signal", "B": "right", "C": "sometimes"}, outcomes)
    assert not half.correct and half.lines[2].startswith("unread C") and half.lines[0].startswith("ok A")
    assert dg.check({"A": "signal", "B": "right"}, outcomes).lines[2].startswith("missing C")
    stub = dg.check({"A": ..., "B": ..., "C": ...}, outcomes)  # the lesson's stub
    assert not stub.correct and all(line.startswith("missing") for line in stub.lines)


def test_bad_answers_are_named():
    with pytest.raises(ValueError, match="'D'"):
        dg.check({"D": "right"}, [])
    with pytest.raises(TypeError, match="dict"):
        dg.check(["A"], [])
    with pytest.raises(ValueError, match="protocol 'Z'"):
        dg.source("Z")
    assert "add_release_gpu" in dg.source("C") and "counters[layer]" in dg.source("C")


def test_without_a_weak_memory_mode_here_it_runs_on_the_simulator_in_a_child(monkeypatch, outcomes):
    monkeypatch.setattr(BACKEND, "models_weak_memory", False)  # as on a GPU
    b0, b1 = dg.run((0, 1), ("B",))  # both seeds in one child
    assert b0.right and b1.right and (b0.protocol, b0.seed, b1.seed) == ("B", 0, 1)


def test_without_outcomes_the_check_runs_every_seed():
    verdict = dg.check({"A": "signal", "B": "right", "C": "wait"})
    assert verdict.correct and "seed(s) " not in verdict.lines[0]  # an ok line names no evidence
    wrong = dg.check({"A": "right", "B": "right", "C": "wait"})
    assert f"seed(s) {', '.join(map(str, dg.SEEDS))}" in wrong.lines[0]
