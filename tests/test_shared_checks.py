"""What several places share (issue 35: one piece of code instead of copies): a data exercise's run that
cannot be scored, as every data judge names it; the GPU probes' check of a variant into poisoned outputs;
a fixed-configuration demo's results file and figures."""

import numpy as np
import pytest

from kernels_lab.core import get_workload
from kernels_lab.grading.records import Run, RunError
from kernels_lab.topics.decode.protocol import ProtocolJudge
from kernels_lab.topics.layernorm.exercise import CombineJudge
from kernels_lab.topics.softmax import cluster_exercise as ce
from kernels_lab.topics.softmax import cluster_probe as cp
from kernels_lab.topics.softmax.cluster_exercise import ClusterJudge


@pytest.mark.parametrize("judge", [ProtocolJudge, ClusterJudge, CombineJudge])
@pytest.mark.parametrize("got, why", [
    (Run(id=0, run_error=RunError("ValueError", "boom " * 200)), "case A: ValueError: boom"),
    (Run(id=0), "case A: the run returned nothing"),
    (Run(id=0, ran=[1, 2]), "case A: the run returned nothing")])
def test_a_run_that_cannot_be_scored_fails_every_check_saying_why(judge, got, why):
    marks = judge().score(None, {"about": "case A"}, got)
    assert [m[0] for m in marks] == list(judge.checks)
    assert all(ok is False and said.startswith(why) and len(said) <= 420 for _, ok, said in marks)


def test_a_scorable_run_has_no_failure():
    assert Run(id=0, ran={"any": 1}).data_failure("case A") is None


@pytest.mark.parametrize("name, variant", [("softmax", "fused"), ("cross_entropy", "fused"), ("layernorm", "unfused")])
def test_the_probes_check_passes_a_right_variant_and_names_an_unwritten_output(name, variant):
    w = get_workload(name)
    size = w.size(rows=3, cols=37)
    assert cp.check(w, w.variant(variant).bind, size, seed=5) is None
    said = cp.check(w, lambda inputs, outputs: (lambda: None), size, seed=5)  # launches nothing
    out = next(iter(w.output_specs(size)))
    assert said is not None and "unwritten" in said and f"first {out}[0" in said


def test_the_probes_row_recheck_finds_a_wrong_row():
    w = get_workload("layernorm")
    inputs = w.make_inputs(w.size(rows=9, cols=21), np.random.default_rng(1))
    right = w.reference(inputs)["out"].astype(np.float32)
    assert cp.check_rows(w, inputs, lambda rows: right[rows], np.random.default_rng(9)) is None
    wrong = right.copy()
    wrong[0, 3] += 1  # row 0 is in every set of windows
    said = cp.check_rows(w, inputs, lambda rows: wrong[rows], np.random.default_rng(9))
    assert said is not None and said.startswith("rows 0..") and "1 bad" in said


def test_a_fixed_demo_writes_its_results_then_its_figures_beside_the_first(tmp_path, capsys):
    from kernels_lab.demos import DemoRequest
    from kernels_lab.demos.common import write_measured
    from kernels_lab.profile import results

    def draw(tag):
        def drawn(records, meta, path):
            path.write_text(f"{tag} {len(records)} {meta['command']}")
            return path
        return drawn
    request = DemoRequest(None, None, 1, tmp_path, tmp_path / "pdl.json", tmp_path / "pdl.png", "kernels-lab demo pdl")
    record = {k: 1 for k in results.REQUIRED_BY_KIND["pdl"]} | {"kind": "pdl"}
    write_measured(request, [record, record], {"timeline": draw("first"), "e2e": draw("second")})
    assert (tmp_path / "pdl.png").read_text() == "first 2 kernels-lab demo pdl"
    assert (tmp_path / "pdl_e2e.png").read_text() == "second 2 kernels-lab demo pdl"
    assert results.load(tmp_path / "pdl.json")["records"] == [record, record]
    said = capsys.readouterr().out.strip()
    assert said == f"wrote {tmp_path / 'pdl.json'}, {tmp_path / 'pdl.png'}, {tmp_path / 'pdl_e2e.png'}"


def _cluster_run(error: str, rejected: bool) -> Run:
    runs = [{"k": k, "error": error, "rejected": rejected} for k in (2, 3, 4)]
    return Run(id=0, ran={**{r: runs for r in ce.RUNS}, "ptx": None})


@pytest.mark.parametrize("rejected, passed", [(True, set()), (False, {ce.WAITS, ce.HOLDS})])
def test_a_combine_the_compiler_rejects_earns_nothing_one_that_raises_alike_keeps_its_barriers(rejected, passed):
    # a GPU: numba's compiler refuses the probe at every launch. The same error in every run is an outcome to compare
    # (a combine that reads past the cluster keeps the barrier checks); a refused compile is none: nothing ran
    from kernels_lab.core import Case
    from kernels_lab.topics.softmax import workload as sm
    error = "TypingError: Failed in cuda mode pipeline" if rejected else "ClusterError: DSMEM access to block rank 2"
    marks = ClusterJudge().score(Case(sm.WORKLOAD.size(rows=1, cols=1), 81), {"seed": 81, "about": "the combine"},
                                 _cluster_run(error, rejected))
    assert {name for name, ok, _ in marks if ok} == passed and not marks[0][1]
    assert all("rejected" in said for name, ok, said in marks[1:] if not ok)
