"""On a machine without a GPU every demo shows the committed H200 run after its own small one: the numbers
(from figures/data, under a heading naming the file and its date) and the figures. Cheap: the numbers are
read from the committed files; the demos' own runs are in tests/test_cli.py."""

import filecmp

import pytest

from kernels_lab.demos import common
from kernels_lab.topics.launch import demo as launch_overhead
from kernels_lab.topics.consumer import demo as consumer
from kernels_lab.topics.decode import demo as decode
from kernels_lab.topics.elementwise import demo as elementwise
from kernels_lab.topics.layernorm import demo as layernorm
from kernels_lab.topics.pdl import demo as pdl
from kernels_lab.topics.rnn import demo as rnn
from kernels_lab.topics.softmax import demo as softmax
from kernels_lab.profile import numbers, results

# each demo's committed results file and what it prints from it on the simulator
SHOWN = {
    "elementwise": ("elementwise_h100.json", elementwise.committed_table),
    "launch": ("ladder_h200.json", lambda doc: launch_overhead.rung_lines(doc["records"])
               + launch_overhead.narrate(doc["records"])),
    "consumer": ("consumer_h200.json", lambda doc: consumer.table(doc["records"]) + consumer.narrate(doc["records"])),
    "softmax": ("softmax_h100.json", softmax.benchmark_table),
    "rnn": ("rnn_h100.json", rnn.benchmark_table),
    "pdl": ("pdl_h200.json", lambda doc: pdl.narrate(doc["records"])),
    "decode": ("decode_h100.json", decode.table),
    "layernorm": ("layernorm_h100.json", layernorm.benchmark_table),
}


def test_every_demo_has_its_committed_numbers():
    from kernels_lab.demos import demos
    assert set(demos()) <= set(SHOWN), "a new demo: add what it shows on the simulator (common.show_committed) here"
    for name, (file, _) in SHOWN.items():
        assert common.committed_results(file) is not None, f"demo {name}: figures/data/{file} is missing"


def test_the_committed_section_names_its_file_and_date_and_copies_the_committed_figures(tmp_path, capsys):
    made = common.show_committed("ladder_h200.json", lambda doc: "NUMBERS", tmp_path, "launch")
    out = capsys.readouterr().out
    meta = results.load(common.committed_results("ladder_h200.json"))["meta"]
    assert f"Measured on {meta['device']} on {meta['date'][:10]}, not here: figures/data/ladder_h200.json" in out
    assert "NUMBERS" in out
    assert [p.name for p in made] == ["launch_ladder.png"]
    assert filecmp.cmp(made[0], common.FIGURES / "ladder_h200_ladder.png", shallow=False)


def test_without_an_out_folder_the_committed_figures_are_named_not_copied(capsys):
    made = common.show_committed("softmax_h100.json", softmax.benchmark_table)
    out = capsys.readouterr().out
    assert made and all(p.parent == common.FIGURES for p in made)
    assert "its figures: " in out and "figures/softmax_h100_versions.png" in out


@pytest.mark.parametrize("name", list(SHOWN))
def test_each_demo_prints_numbers_read_from_its_committed_file(name):
    file, shown = SHOWN[name]
    doc = results.load(common.committed_results(file))
    text = shown(doc)
    assert "n/a" not in text, f"demo {name}: a committed number shown as not measured"
    recs = [r for r in doc["records"] if r.get("time_ms") or r.get("p50_us") or r.get("e2e_us")
            or r.get("host_us_per_launch")]
    assert recs, f"{file} has no measured numbers"
    assert any(token in text for token in _measured_tokens(recs)), f"demo {name} prints none of {file}'s numbers"


def _measured_tokens(recs):
    for r in recs:
        for key, fmt in (("GBs", "{:.0f}"), ("GBs_model", "{:.0f}"), ("GBs_useful", "{:.0f}"), ("time_ms", "{:.3f}"),
                         ("p50_us", "{:.1f}"), ("e2e_us", "{:.0f} us"), ("us_per_step", "{:.2f}"), ("us_per_pass", "{:.1f}"),
                         ("host_us_per_launch", "{:.2f}")):
            if r.get(key):
                yield fmt.format(r[key])


def test_the_consumer_demo_quotes_the_payload_and_the_numbers_of_the_readme():
    doc = results.load(common.committed_results("consumer_h200.json"))
    said = consumer.narrate(doc["records"])
    from kernels_lab.topics.consumer.numbers import consumer as quoted
    c = quoted()
    assert f"With a {c['payload'] // 1024} KiB payload" in said
    assert f"{c['p50']:.1f} us (p50; p99 {c['p99']:.1f} us" in said and f"{c['speedup']:.1f}x" in said


def test_the_site_demo_page_lists_every_demo():
    """docs/demos.md's table names every demo `kernels-lab demo --list` knows (the site's Demos page)."""
    from pathlib import Path
    from kernels_lab.demos import demos
    page = (Path(__file__).resolve().parents[1] / "docs" / "demos.md").read_text()
    missing = [name for name in demos() if f"| `{name}` |" not in page]
    assert not missing, f"docs/demos.md has no row for the demo(s) {missing}"
