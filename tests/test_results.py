import json

import pytest

from kernels_lab.profile import results


def _record(**kw):
    r = {"workload": "elementwise", "variant": "fused", "pattern": "fused", "n": 10, "launches": 1,
         "bytes_model": 120, "time_ms": None, "GBs": None}
    r.update(kw)
    return r


def test_round_trip(tmp_path):
    meta = results.make_meta("test", None)
    path = results.dump(meta, [_record(), {"kind": "launch", "path": "graph", "host_us_per_launch": 0.1}],
                        tmp_path / "r.json")
    doc = results.load(path)
    assert doc["schema"] == results.SCHEMA and doc["records"][0]["variant"] == "fused"
    assert set(results.REQUIRED_META) <= set(doc["meta"]) and "numba-cuda" in doc["meta"]["versions"]


@pytest.mark.parametrize("damage,message", [
    (lambda d: d.update(schema="other/v9"), "schema"),
    (lambda d: d["meta"].pop("device"), "meta lacks device"),
    (lambda d: d["records"][0].pop("bytes_model"), "record 0 lacks bytes_model"),
    (lambda d: d.pop("records"), "records"),
])
def test_rejects_bad_files(tmp_path, damage, message):
    doc = {"schema": results.SCHEMA, "meta": results.make_meta("t", None), "records": [_record()]}
    damage(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(results.ResultsError, match=message):
        results.load(p)


def test_rejects_truncated_and_missing_files(tmp_path):
    p = tmp_path / "cut.json"
    path = results.dump(results.make_meta("t", None), [_record()], p)
    path.write_text(path.read_text()[:-40])
    with pytest.raises(results.ResultsError, match="truncated"):
        results.load(p)
    with pytest.raises(results.ResultsError, match="no such file"):
        results.load(tmp_path / "absent.json")


def test_a_study_record_names_its_three_rates(tmp_path):
    """A study record carries GBs_model, GBs_useful and GBs_weight apart (never one 'GBs' meaning any of them)."""
    rec = {"kind": "study", "workload": "softmax", "group": "shapes", "line": "v3", "variant": "fused",
           "registered": False, "pattern": "fused", "n": 10, "size": {"rows": 2, "cols": 5}, "launches": 1,
           "bytes_model": 80, "bytes_useful": 80, "bytes_weight": None, "checked": True, "time_ms": 1.0,
           "time_ms_steady": 0.9, "GBs_model": 8e-5, "GBs_useful": 8e-5, "GBs_weight": None}
    meta = results.make_meta("test", None)
    assert results.load(results.dump(meta, [rec], tmp_path / "s.json"))["records"][0]["line"] == "v3"
    for field in ("GBs_useful", "time_ms_steady", "bytes_weight"):
        with pytest.raises(results.ResultsError, match=f"record 0 lacks {field}"):
            results.dump(meta, [{k: v for k, v in rec.items() if k != field}], tmp_path / "bad.json")
