"""The hand-labelled linker evaluation set and benchmarks/linker_quality.py's metrics."""

import importlib.util
import json
import os

import pytest
from tests import REPO_ROOT

REPO = str(REPO_ROOT)
DATA = os.path.join(REPO, "benchmarks", "data", "linker_eval")
SCRIPT = os.path.join(REPO, "benchmarks", "linker_quality.py")


def _load_script():
  spec = importlib.util.spec_from_file_location("linker_quality_under_test", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _tsv_titles(path):
  """Titles of an aliases.tsv, read independently of the script."""
  titles, header = set(), None
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.rstrip("\n")
      if line.startswith("#oov\t"):
        titles.add(line.split("\t")[1])
        continue
      if not line or line.startswith("#"):
        continue
      fields = line.split("\t")
      assert len(fields) == 3, line
      if header is None:
        header = fields
        continue
      assert int(fields[2]) >= 1, line
      titles.add(fields[1])
  assert header == ["alias", "title", "count"]
  return titles


def test_data_files_parse_and_are_consistent():
  titles = _tsv_titles(os.path.join(DATA, "aliases.tsv"))
  sentences = []
  with open(os.path.join(DATA, "mentions.jsonl"), encoding="utf-8") as f:
    for line in f:
      sentences.append(json.loads(line))
  assert len(sentences) >= 40
  assert len({s["id"] for s in sentences}) == len(sentences)
  mentions = 0
  for s in sentences:
    text = s["text"]
    for m in s["mentions"]:
      assert 0 <= m["begin"] < m["end"] <= len(text), s["id"]
      assert text[m["begin"]:m["end"]].strip(), s["id"]
      assert m["title"] is None or m["title"] in titles, (s["id"], m["title"])
      mentions += 1
  assert mentions >= 100
  labelled = [m["title"] for s in sentences for m in s["mentions"]]
  assert labelled.count(None) >= 10  # NIL mentions
  assert any(not s["text"].isascii() for s in sentences)
  # The script's own loaders accept the files as well.
  script = _load_script()
  rows, oov = script.read_alias_rows(os.path.join(DATA, "aliases.tsv"))
  table, title_ids = script.build_table(rows, oov)
  assert oov and not oov & set(title_ids)
  assert set(table.column("entity_id").to_pylist()) >= {0, 1}
  assert len(script.read_sentences(os.path.join(DATA, "mentions.jsonl"),
                                   {t for _, t, _ in rows})) == len(sentences)


TINY_ALIASES = """# a tiny table
#oov\tApple (band)
alias\ttitle\tcount
Paris\tParis\t8
Paris\tParis Hilton\t2
Paris Hilton\tParis Hilton\t5
Jordan\tJordan\t5
Jordan\tMichael Jordan\t5
Mercury\tMercury (planet)\t1
Apple\tApple Inc.\t3
Apple\tApple (band)\t4
"""

TINY_SENTENCES = [  # (text, [(surface, title)])
    ("Paris Hilton visited Paris.", [("Paris Hilton", "Paris Hilton"), ("Paris", "Paris")]),
    ("Jordan met Mercury fans.", [("Jordan", "Michael Jordan"), ("Mercury", "Mercury (planet)")]),
    ("Apple sued Zed and the Paris Review.", [("Apple", "Apple Inc."), ("Zed", None),
                                             ("Paris Review", None)]),
]


@pytest.fixture(name="tiny_dir")
def _tiny_dir(tmp_path):
  (tmp_path / "aliases.tsv").write_text(TINY_ALIASES, encoding="utf-8")
  lines = []
  for k, (text, mentions) in enumerate(TINY_SENTENCES):
    out, pos = [], 0
    for surface, title in mentions:
      begin = text.index(surface, pos)
      pos = begin + len(surface)
      out.append({"begin": begin, "end": pos, "title": title})
    lines.append(json.dumps({"id": f"t{k}", "text": text, "mentions": out}))
  (tmp_path / "mentions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(tmp_path)


def _figure(capsys, argv):
  _load_script().main(argv)
  return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_metrics_match_a_hand_computation(tiny_dir, capsys):
  figure = _figure(capsys, ["--data_dir", tiny_dir])
  # Gold spans. Linkable: Paris Hilton, Paris, Michael Jordan, Mercury (planet), Apple Inc.
  # Links: "Paris Hilton" and "Paris" right; "Jordan" -> Jordan (a 5/5 tie, title order):
  # wrong; "Mercury": count 1 < 2; "Apple": 3 of 7 (the band, outside the vocabulary, is in
  # the denominator); "Zed", "Paris Review": no alias.  P = 2/3, R = 2/5.
  assert figure["metric"] == "linker_f1_gold_spans" and figure["unit"] == "F1"
  assert figure["mentions"] == 7 and figure["linkable"] == 5
  assert (figure["links"], figure["correct"]) == (3, 2)
  assert figure["precision"] == pytest.approx(2 / 3, abs=1e-4)
  assert figure["recall"] == pytest.approx(2 / 5, abs=1e-4)
  assert figure["value"] == pytest.approx(0.5, abs=1e-4)
  assert figure["nil_accuracy"] == pytest.approx(1.0)
  # End to end: the ruler finds Paris Hilton, Paris, Jordan, Mercury, Apple and the "Paris" of
  # "Paris Review" (no gold span of its own, linked to Paris: a wrong link).  P = 2/4, R = 2/5.
  e2e = figure["end_to_end"]
  assert (e2e["spans"], e2e["exact_spans"], e2e["links"], e2e["correct"]) == (6, 5, 4, 2)
  assert e2e["precision"] == pytest.approx(0.5, abs=1e-4)
  assert e2e["recall"] == pytest.approx(0.4, abs=1e-4)
  assert e2e["f1"] == pytest.approx(4 / 9, abs=1e-4)


def test_threshold_flags_reach_the_linker(tiny_dir, capsys):
  # min_count 1: "Mercury" (1 of 1) links too; min_probability 0.4: "Apple" (3/7) as well.
  figure = _figure(capsys, ["--data_dir", tiny_dir, "--min_count", "1",
                            "--min_probability", "0.4"])
  assert (figure["links"], figure["correct"]) == (5, 4)
  assert figure["precision"] == pytest.approx(4 / 5, abs=1e-4)
  assert figure["recall"] == pytest.approx(4 / 5, abs=1e-4)
  assert (figure["min_count"], figure["min_probability"]) == (1, 0.4)


def test_bad_title_is_rejected(tiny_dir):
  with open(os.path.join(tiny_dir, "mentions.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps({"id": "bad", "text": "Rome.", "mentions": [
        {"begin": 0, "end": 4, "title": "Rome"}]}) + "\n")
  with pytest.raises(SystemExit, match="not in the alias table"):
    _load_script().main(["--data_dir", tiny_dir])
