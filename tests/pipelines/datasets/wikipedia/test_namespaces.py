"""Wikipedia dumps in other languages: namespace prefixes are the dump's ``<siteinfo>`` names
(bgwiki ``Файл``, ``Категория``, ``Шаблон``), MediaWiki's canonical English names (``File``,
``Category``) and its built-in aliases (``Image``), in the cleaner and in the whole job."""

import bz2
import glob
import os
import subprocess
import sys

import pytest

from schemas import documents as documents_schema
from schemas import entities as entities_schema
from pipelines import runner
from pipelines.datasets.wikipedia import reader
from pipelines.datasets.wikipedia import pages as pages_lib
from pipelines.datasets.wikipedia.reader import SiteInfo
from pipelines.text.wiki_titles import Title, normalize_title
from pipelines.text.wikitext import Link, clean
from tests.pipelines.helpers import read_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
SMALL = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "8"]

BG_NAMESPACES = ((-2, "Медия"), (-1, "Специални"), (0, ""), (1, "Беседа"), (2, "Потребител"),
                 (4, "Уикипедия"), (5, "Уикипедия беседа"), (6, "Файл"), (7, "Файл беседа"),
                 (10, "Шаблон"), (14, "Категория"), (15, "Категория беседа"), (100, "Портал"))
DE_NAMESPACES = ((-2, "Medium"), (0, ""), (6, "Datei"), (10, "Vorlage"), (14, "Kategorie"))

PLOVDIV = ("'''Пловдив''' е град в [[България]].[[Файл:Map.png|thumb|Карта на [[София]]]] "
           "Близо е до [[София|столицата]].\n"
           "[[File:X.jpg|thumb|caption]][[Image:Y.jpg|thumb|c]] [[файл:z.png]] "
           "[[Медия:Звук.ogg]] Виж [[:Категория:Градове|градовете]] и "
           "[[Уикипедия:Правила|правилата]].\n"
           "{{Шаблон:Градове в България}}\n"
           "[[Категория:Градове]]\n[[Category:Cities]]\n[[категория:Малки_градове]]")
# Written by hand: every File/Image/Media link is gone with its caption, the categories are
# gone, the leading-colon category and the project link keep their display text.
PLOVDIV_TEXT = ("Пловдив е град в България. Близо е до столицата.\n"
                "Виж градовете и правилата.")
PLOVDIV_LINKS = (Link(0, 7, "Пловдив", "Пловдив"),  # a self mention
                 Link(17, 25, "България", "България"),
                 Link(38, 47, "София", "столицата"))
PLOVDIV_CATEGORIES = ("Градове", "Cities", "Малки градове")

BG_PAGES = [  # (title, ns, id, text)
    ("Пловдив", 0, 1, PLOVDIV),
    ("София", 0, 2, "'''София''' е столицата на [[България]]. [[File:S.jpg|мини|Центърът]]"
     "\n[[Category:Столици]]"),
    ("Файл:Map.png", 6, 3, "Карта на [[България]]."),
    ("Категория:Градове", 14, 4, "Градове в [[България]]."),
]
DE_PAGES = [("Köln", 0, 11, "'''Köln''' liegt am [[Rhein]].[[Datei:Dom.jpg|mini|Der [[Dom]]]] "
             "[[File:F.jpg|thumb|x]] [[image:I.jpg]]\n[[Kategorie:Stadt]]")]


def _xml(lang, namespaces, pages):
  site = "".join(f'<namespace key="{k}" case="first-letter">{n}</namespace>' if n else
                 f'<namespace key="{k}" case="first-letter" />' for k, n in namespaces)
  body = "".join(
      f"<page><title>{t}</title><ns>{ns}</ns><id>{i}</id><revision><id>{100 + i}</id>"
      f"<text xml:space=\"preserve\">{_escape(text)}</text></revision></page>\n"
      for t, ns, i, text in pages)
  return (f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" '
          f'xml:lang="{lang}">\n<siteinfo><sitename>Уикипедия</sitename>'
          f"<case>first-letter</case><namespaces>{site}</namespaces></siteinfo>\n{body}"
          "</mediawiki>\n")


def _escape(text):
  return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _write_multistream(path, lang, namespaces, pages):
  """A multistream bz2 dump (header stream, one stream per page, trailer) and its index."""
  xml = _xml(lang, namespaces, pages)
  head, rest = xml.split("</siteinfo>\n", 1)
  chunks = rest[:-len("</mediawiki>\n")].split("</page>\n")[:-1]
  data, index = bz2.compress((head + "</siteinfo>\n").encode()), []
  for (title, _, page_id, _), chunk in zip(pages, chunks):
    index.append(f"{len(data)}:{page_id}:{title}\n")
    data += bz2.compress((chunk + "</page>\n").encode())
  data += bz2.compress(b"</mediawiki>\n")
  with open(path, "wb") as f:
    f.write(data)
  with open(path[:-len(".xml.bz2")] + "-index.txt.bz2", "wb") as f:
    f.write(bz2.compress("".join(index).encode()))


BG_SITE = SiteInfo(namespaces=BG_NAMESPACES, lang="bg")


# --- the names table and the cleaner -----------------------------------------------------------

def test_link_names_add_canonical_names_and_aliases_to_the_local_ones():
  names = BG_SITE.link_names()
  assert names["файл"] == 6 and names["file"] == 6 and names["image"] == 6
  assert names["категория"] == 14 and names["category"] == 14
  assert names["шаблон"] == 10 and names["template"] == 10
  assert names["уикипедия"] == 4 and names["project"] == 4 and names["project talk"] == 5
  assert names["медия"] == -2 and names["media"] == -2 and names["file talk"] == 7
  assert names["image talk"] == 7 and names["special"] == -1 and names["портал"] == 100
  assert "module" not in names and "portal" not in names  # not a namespace of this wiki
  assert "" not in names and 0 not in names.values()
  # the English table is unchanged: its names already are the canonical ones
  assert SiteInfo.default().link_names() == SiteInfo.default().names()


def test_namespace_prefixes_case_spaces_and_underscores():
  ns = pages_lib.namespaces_of(BG_SITE)
  assert normalize_title("Файл:Map.png", ns) == Title(6, "Map.png")
  assert normalize_title("файл:z.png", ns) == Title(6, "Z.png")
  assert normalize_title("ФАЙЛ:z.png", ns) == Title(6, "Z.png")
  assert normalize_title("File:X.jpg", ns) == Title(6, "X.jpg")
  assert normalize_title("image:y.jpg", ns) == Title(6, "Y.jpg")
  assert normalize_title("Файл_беседа:A", ns) == Title(7, "A")
  assert normalize_title("File_talk:A", ns) == Title(7, "A")
  assert normalize_title(" категория :Малки_градове", ns) == Title(14, "Малки градове")
  assert normalize_title(":Category:Cities", ns) == Title(14, "Cities")
  assert normalize_title("Datei:Dom.jpg", ns) == Title(0, "Datei:Dom.jpg")  # dewiki's name
  assert normalize_title("Файл:Map.png", ns).full == "File:Map.png"


def test_bgwiki_page_is_cleaned_with_the_dump_namespaces():
  page = clean(PLOVDIV, "Пловдив", pages_lib.namespaces_of(BG_SITE))
  assert page.text == PLOVDIV_TEXT
  assert page.links == PLOVDIV_LINKS
  assert page.categories == PLOVDIV_CATEGORIES
  assert page.templates == ("градове в българия",)  # "Шаблон:" dropped like "Template:"
  assert page.paragraphs == ((0, len(PLOVDIV_TEXT), ""),)


def test_without_the_siteinfo_the_local_names_leak():
  """The old behaviour (English table only): Файл/Категория links become text and entities."""
  page = clean(PLOVDIV, "Пловдив", pages_lib.namespaces_of(None))
  assert "Карта на София" in page.text and "Файл:" in {l.target[:5] for l in page.links}
  assert "Категория:Градове" in {l.target for l in page.links}
  assert page.categories == ("Cities",)


def test_leading_colon_and_other_namespaces_keep_english_behaviour():
  ns = pages_lib.namespaces_of(BG_SITE)
  page = clean("a [[:Категория:X|y]] b [[:Файл:F.jpg]] c [[Шаблон:T|t]] d [[Беседа:Z]] "
               "e [[Категория:Q|sort]] f", namespaces=ns)
  assert page.text == "a y b Файл:F.jpg c t d Беседа:Z e f"
  assert page.links == ()
  assert page.categories == ("Q",)
  english = clean("a [[:Category:X|y]] b [[:File:F.jpg]] c [[Template:T|t]] d [[Talk:Z]] "
                  "e [[Category:Q|sort]] f", namespaces=ns)
  assert english.text == "a y b File:F.jpg c t d Talk:Z e f"
  assert english.links == () and english.categories == ("Q",)


def test_the_reader_hands_the_siteinfo_and_the_page_namespaces(tmp_path):
  path = str(tmp_path / "bgwiki.xml")
  with open(path, "w", encoding="utf-8") as f:
    f.write(_xml("bg", BG_NAMESPACES, BG_PAGES))
  with open(path, "rb") as f:
    site = reader.read_siteinfo(f, path)
  assert site == BG_SITE
  with open(path, "rb") as f:
    pages = list(reader.iter_pages(f, path))
  assert [(p.title, p.namespace) for p in pages] == [(t, ns) for t, ns, _, _ in BG_PAGES]
  ns = pages_lib.namespaces_of(site)
  rules = pages_lib.PageRules()
  outcomes = [pages_lib.convert_page(p, ns, rules) for p in pages]
  assert [kind for kind, _ in outcomes] == ["document", "document", "skip", "skip"]
  assert outcomes[2][1] == outcomes[3][1] == "namespace"
  doc, pairs = outcomes[0][1]
  assert doc.text == PLOVDIV_TEXT
  assert [(m.begin, m.end, m.entity) for m in doc.mentions] == [
      (l.begin, l.end, l.target) for l in PLOVDIV_LINKS]
  assert pairs == [("Пловдив", "Пловдив"), ("България", "България"), ("София", "столицата")]


# --- the job --------------------------------------------------------------------------------------

def _mentions(out):
  docs = documents_schema.load(out)
  found = set()
  for r in read_records(out):
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc_id = r["document_id"][s].decode()
      L = len(r["token_ids"]) // len(r["segment_mask"])
      found.add((doc_id, docs[doc_id]["text"][r["char_begin"][s * L + b]:
                                              r["char_end"][s * L + e]], int(ent)))
  return found


def _check_output(out, with_de):
  docs = documents_schema.load(out)
  assert sorted(docs) == (["1", "11", "2"] if with_de else ["1", "2"])
  assert docs["1"]["text"] == PLOVDIV_TEXT
  assert docs["2"]["text"] == "София е столицата на България."
  if with_de:
    assert docs["11"]["text"] == "Köln liegt am Rhein."
  for d in docs.values():
    for leak in ("Файл", "File:", "Image:", "Категория", "Category", "Datei", "thumb",
                 "мини", "mini", "Карта", "caption", "Центърът"):
      assert leak not in d["text"], (leak, d["text"])
  vocab = entities_schema.read_vocabulary(os.path.join(out, "entities", "vocabulary.parquet"))
  titles = {row["title"]: row["entity_id"] for row in vocab.to_pylist()}
  expected = {"България", "Пловдив", "София"} | ({"Köln", "Rhein"} if with_de else set())
  assert set(titles) == expected
  aliases = entities_schema.read_aliases(
      sorted(glob.glob(os.path.join(out, "entities", "aliases-*"))))
  for a in aliases.to_pylist():
    assert ":" not in a["alias"] and ":" not in a["title"], a
  want = {("1", "Пловдив", titles["Пловдив"]), ("1", "България", titles["България"]),
          ("1", "столицата", titles["София"]), ("2", "София", titles["София"]),
          ("2", "България", titles["България"])}
  if with_de:
    want |= {("11", "Köln", titles["Köln"]), ("11", "Rhein", titles["Rhein"])}
  assert _mentions(out) == want


@pytest.mark.slow
def test_job_module_on_two_dumps_each_with_its_own_siteinfo(tmp_path):
  """``python -m pipelines wikipedia`` on a glob of a bgwiki and a dewiki dump (plain XML)."""
  inputs = tmp_path / "in"
  inputs.mkdir()
  (inputs / "bgwiki-pages-articles.xml").write_text(_xml("bg", BG_NAMESPACES, BG_PAGES),
                                                    encoding="utf-8")
  (inputs / "dewiki-pages-articles.xml").write_text(_xml("de", DE_NAMESPACES, DE_PAGES),
                                                    encoding="utf-8")
  out = str(tmp_path / "out")
  proc = subprocess.run([sys.executable, "-m", "pipelines", "wikipedia", "--input",
                         str(inputs / "*.xml"), "--output_dir", out] + SMALL,
                        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  _check_output(out, with_de=True)


@pytest.mark.slow
@pytest.mark.parametrize("streams_per_split", [1, 10])
def test_job_on_a_bgwiki_multistream_dump_read_in_ranges(tmp_path, streams_per_split):
  """Ranges after the header stream get the file's siteinfo too."""
  dump = str(tmp_path / "bgwiki-pages-articles-multistream.xml.bz2")
  _write_multistream(dump, "bg", BG_NAMESPACES, BG_PAGES)
  out = str(tmp_path / "out")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out,
                                           "--streams_per_split", str(streams_per_split)]
                             + SMALL) == 0
  _check_output(out, with_de=False)
