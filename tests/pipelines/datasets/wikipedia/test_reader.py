"""MediaWiki dump reading: round trips, multistream splits, damaged streams, real samples,
bounded memory; and the synthetic dump generator."""

import bz2
import io
import os
import subprocess
import sys
import textwrap

import pytest

from pipelines.datasets.wikipedia import fake_input as synth
from pipelines.datasets.wikipedia.fake_input import PageSpec, generate_pages, page_xml, write_dump
from pipelines.datasets.wikipedia import multistream_index
from pipelines.datasets.wikipedia import reader as w
from pipelines.datasets.wikipedia.reader import DumpError, Page, SiteInfo

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
SAMPLES = os.path.join(REPO, "..", "shared", "samples", "wikipedia")

SPECS = [
    PageSpec("AT&T", "Text with <b>bold</b> & an entity &amp; \"quotes\" ]]> and 'apostrophes'."),
    PageSpec("Café <Zürich> \"q\" 'a' & b", "unicode 日本語 🎉\nline two\r\nwith CR\n\ttab  "),
    PageSpec("Empty", ""),
    PageSpec("Old name", "#REDIRECT [[AT&T]]", redirect="AT&T"),
    PageSpec("Talk:AT&T", "== Talk ==\nsome words", namespace=1),
    PageSpec("  Spaced title ", "\n  leading and trailing whitespace  \n"),
]


def expected_pages(specs, source):
  return [Page(title=s.title, namespace=s.namespace, page_id=i + 1, revision_id=1000001 + i,
               text=s.text, redirect=s.redirect, source_id=f"{source}#{i + 1}")
          for i, s in enumerate(specs)]


def read_all(path):
  with open(path, "rb") as f:
    return list(w.iter_pages(f, path))


def read_ranges(path, ranges, **kw):
  pages, errors = [], []
  for start, end in ranges:
    with open(path, "rb") as f:  # each range on its own handle, as on a worker
      pages += list(w.iter_pages_in_range(f, path, start, end, errors.append, **kw))
  return pages, errors


def strip_source(pages):
  return [(p.title, p.namespace, p.page_id, p.revision_id, p.text, p.redirect) for p in pages]


def siteinfo_of(path):
  with open(path, "rb") as f:
    return w.read_siteinfo(f, path)


def index_offsets(path):
  with open(path, "rb") as f:
    return multistream_index.read_index(f, path)


def raw_multistream(path, streams, header=True, trailer=True):
  """A multistream dump from hand-written stream texts; returns the page stream offsets."""
  offsets = []
  with open(path, "wb") as f:
    if header:
      f.write(bz2.compress(b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" '
                           b'xml:lang="en">\n'))
    for text in streams:
      offsets.append(f.tell())
      f.write(bz2.compress(text.encode("utf-8")))
    if trailer:
      f.write(bz2.compress(b"</mediawiki>\n"))
  return offsets


# --- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("schema", ["0.10", "0.11"])
@pytest.mark.parametrize("multistream", [False, True])
def test_round_trip(tmp_path, schema, multistream):
  path = str(tmp_path / "enwiki-20240101-pages-articles-multistream.xml.bz2")
  index = write_dump(SPECS, path, multistream=multistream, pages_per_stream=4, schema=schema)
  with bz2.open(path) as f:
    assert f"http://www.mediawiki.org/xml/export-{schema}/".encode() in f.read(400)
  assert read_all(path) == expected_pages(SPECS, path)
  assert siteinfo_of(path) == SiteInfo.default()
  if not multistream:
    assert index is None
    assert not os.path.exists(str(tmp_path / "enwiki-20240101-pages-articles-multistream-index"
                                           ".txt.bz2"))
    return
  assert index == str(tmp_path / "enwiki-20240101-pages-articles-multistream-index.txt.bz2")
  offsets = index_offsets(index)
  assert len(offsets) == 2  # 6 pages, 4 per stream
  pages, errors = read_ranges(path, multistream_index.plan_splits(offsets, os.path.getsize(path)))
  assert errors == []
  assert strip_source(pages) == strip_source(expected_pages(SPECS, path))
  assert [p.source_id for p in pages] == (
      [f"{path}@{offsets[0]}#{i}" for i in (1, 2, 3, 4)]
      + [f"{path}@{offsets[1]}#{i}" for i in (5, 6)])


def test_no_siteinfo(tmp_path):
  for multistream in (False, True):
    path = str(tmp_path / f"nosite{multistream}.xml.bz2")
    index = write_dump(SPECS, path, multistream=multistream, siteinfo=False)
    assert siteinfo_of(path) is None
    assert read_all(path) == expected_pages(SPECS, path)
    assert (index == path + ".index.txt.bz2") if multistream else index is None


def test_namespace_inferred_without_ns(tmp_path):
  pages = "".join(
      f"<page><title>{t}</title><id>{i}</id><revision><id>{i}</id><text>x</text></revision>"
      f"</page>" for i, t in enumerate(["Talk:A", "Image:B.jpg", "WP:C", "Foo: bar", "Plain",
                                         "category_talk:D", "Wikipedysta:E", "Module:F"]))
  site = ('<siteinfo><case>first-letter</case><namespaces><namespace key="0" />'
          '<namespace key="2">Wikipedysta</namespace><namespace key="1">Talk</namespace>'
          '<namespace key="15">Category talk</namespace></namespaces></siteinfo>')
  for with_site, expected in ((True, [1, 6, 4, 0, 0, 15, 2, 0]),
                              (False, [1, 6, 4, 0, 0, 15, 0, 828])):
    path = str(tmp_path / f"old{with_site}.xml.bz2")
    with open(path, "wb") as f:
      f.write(bz2.compress(('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.3/" '
                            f'xml:lang="pl">{site if with_site else ""}{pages}</mediawiki>'
                            ).encode()))
    assert [p.namespace for p in read_all(path)] == expected
    info = siteinfo_of(path)
    if with_site:
      assert info == SiteInfo(namespaces=((0, ""), (2, "Wikipedysta"), (1, "Talk"),
                                          (15, "Category talk")), case="first-letter", lang="pl")
    else:
      assert info is None


def test_siteinfo_names():
  names = SiteInfo.default().names()
  assert names["talk"] == 1 and names["user talk"] == 3 and names["module talk"] == 829
  assert names["image"] == 6 and names["image talk"] == 7 and names["wp"] == 4
  assert names["project"] == 4 and names["media"] == -2 and names["draft"] == 118
  assert "" not in names and 0 not in names.values()
  assert len(SiteInfo.default().namespaces) == 24
  custom = SiteInfo(namespaces=((0, ""), (4, "Wikipedia"), (6, "Plik")), lang="pl").names()
  assert custom == {"wikipedia": 4, "plik": 6, "image": 6, "image talk": 7, "wp": 4,
                    "project": 4, "project talk": 5}


def test_plain_xml_is_read(tmp_path):
  path = str(tmp_path / "dump.xml.bz2")
  write_dump(SPECS[:2], path)
  plain = str(tmp_path / "dump.xml")
  with bz2.open(path) as f, open(plain, "wb") as g:
    g.write(f.read())
  assert strip_source(read_all(plain)) == strip_source(expected_pages(SPECS[:2], path))


# --- multistream splits -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def multistream_dump(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("ms") / "enwiki-x-pages-articles-multistream.xml.bz2")
  index = write_dump(generate_pages(1000, seed=3, words_per_page=60), path, multistream=True,
                     pages_per_stream=50)
  return path, index, read_all(path)


def test_multistream_splits_match_sequential_read(multistream_dump):
  path, index, sequential = multistream_dump
  assert len(sequential) == 1000
  offsets = index_offsets(index)
  assert len(offsets) == 20 and offsets == sorted(offsets) and offsets[0] > 0
  size = os.path.getsize(path)
  for kw, n_ranges in ((dict(), 20), (dict(max_splits=7), 7), (dict(streams_per_split=3), 7),
                       (dict(streams_per_split=5), 4)):
    ranges = multistream_index.plan_splits(offsets, size, **kw)
    assert len(ranges) == n_ranges
    assert ranges[0][0] == offsets[0] and ranges[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    pages, errors = read_ranges(path, ranges)
    assert errors == []
    assert strip_source(pages) == strip_source(sequential)
    assert len({p.page_id for p in pages}) == 1000
  # The source id names the stream: pages 0-49 in the first, 50-99 in the second...
  pages, _ = read_ranges(path, multistream_index.plan_splits(offsets, size, max_splits=2))
  assert pages[49].source_id == f"{path}@{offsets[0]}#{pages[49].page_id}"
  assert pages[50].source_id == f"{path}@{offsets[1]}#{pages[50].page_id}"


def test_range_including_header_stream(multistream_dump):
  path, _, sequential = multistream_dump
  pages, errors = read_ranges(path, [(0, os.path.getsize(path))])
  assert errors == [] and strip_source(pages) == strip_source(sequential)


class RecordingFile(io.FileIO):
  def __init__(self, path):
    super().__init__(path, "rb")
    self.reads = []

  def read(self, n=-1):
    start = self.tell()
    data = super().read(n)
    self.reads.append((start, start + len(data), n))
    return data


def test_range_reads_in_chunks_within_the_range(multistream_dump, monkeypatch):
  path, index, sequential = multistream_dump
  offsets = index_offsets(index)
  monkeypatch.setattr(w, "READ_SIZE", 4096)
  start, end = offsets[5], offsets[9]
  with RecordingFile(path) as f:
    pages = list(w.iter_pages_in_range(f, path, start, end))
    reads = f.reads
  assert strip_source(pages) == strip_source(sequential[250:450])
  assert len(reads) > 10 and all(0 < n <= 4096 for _, _, n in reads)
  assert min(b for b, _, _ in reads) == start and max(e for _, e, _ in reads) == end


def test_plan_splits():
  offsets = [500, 100, 300, 200, 400, 300]
  assert multistream_index.plan_splits(offsets, 600) == [(100, 200), (200, 300), (300, 400), (400, 500),
                                         (500, 600)]
  assert multistream_index.plan_splits(offsets, 600, streams_per_split=2) == [(100, 300), (300, 500),
                                                              (500, 600)]
  assert multistream_index.plan_splits(offsets, 600, max_splits=2) == [(100, 300), (300, 600)]
  assert multistream_index.plan_splits(offsets, 600, max_splits=3, streams_per_split=2) == [
      (100, 200), (200, 400), (400, 600)]
  assert multistream_index.plan_splits(offsets, 600, max_splits=9) == multistream_index.plan_splits(offsets, 600)
  assert multistream_index.plan_splits([], 600) == []
  with pytest.raises(ValueError):
    multistream_index.plan_splits(offsets, 600, streams_per_split=0)
  with pytest.raises(ValueError):
    multistream_index.plan_splits(offsets, 600, max_splits=-1)
  with pytest.raises(DumpError) as e:
    multistream_index.plan_splits(offsets, 500)
  assert e.value.reason == "bad_index"


def test_read_index(tmp_path):
  path = str(tmp_path / "index.txt.bz2")
  lines = "900:7:Talk:A: b:c\n600:5:X\n600:6:Y\n900:8:Z\n1200:9:\n"
  with open(path, "wb") as f:
    f.write(bz2.compress(lines.encode()))
  assert index_offsets(path) == [600, 900, 1200]
  plain = str(tmp_path / "index.txt")
  with open(plain, "w") as f:
    f.write(lines)
  assert index_offsets(plain) == [600, 900, 1200]
  for bad in ("600:5:X\n600-6-Y\n", "600:5\n", "x:5:T\n", "", "600:5:X\n-1:2:T\n"):
    with open(path, "wb") as f:
      f.write(bz2.compress(bad.encode()))
    with pytest.raises(DumpError) as e:
      index_offsets(path)
    assert e.value.reason == "bad_index" and e.value.source == path
  with open(path, "wb") as f:
    f.write(bz2.compress(lines.encode())[:-10])
  with pytest.raises(DumpError) as e:
    index_offsets(path)
  assert e.value.reason == "bad_index"


# --- damaged dumps ----------------------------------------------------------------------------

def test_truncated_multistream(multistream_dump, tmp_path):
  path, index, sequential = multistream_dump
  offsets = index_offsets(index)
  size = os.path.getsize(path)
  cut = (offsets[8] + offsets[9]) // 2
  short = str(tmp_path / "short-multistream.xml.bz2")
  with open(path, "rb") as f, open(short, "wb") as g:
    g.write(f.read(cut))
  pages, errors = read_ranges(short, [(offsets[0], size)])
  assert [(e.reason, e.source) for e in errors] == [("truncated_bz2", f"{short}@{offsets[8]}")]
  assert "0 pages of this stream were read" in str(errors[0])
  assert strip_source(pages) == strip_source(sequential[:400])
  # Split by the original index: the cut range reports the cut stream, each later range the
  # missing end of the file.
  ranges = multistream_index.plan_splits(offsets, size, streams_per_split=3)
  pages, errors = read_ranges(short, ranges)
  assert strip_source(pages) == strip_source(sequential[:400])
  assert [(e.reason, e.source) for e in errors] == [("truncated_bz2", f"{short}@{offsets[8]}")] + [
      ("truncated_bz2", f"{short}@{start}") for start, _ in ranges[3:]]
  with open(short, "rb") as f:
    with pytest.raises(DumpError) as e:
      list(w.iter_pages_in_range(f, short, offsets[6], offsets[10]))
  assert e.value.reason == "truncated_bz2" and e.value.source == f"{short}@{offsets[8]}"


def test_truncated_single_stream(tmp_path):
  path = str(tmp_path / "single.xml.bz2")
  write_dump(generate_pages(300, seed=1, words_per_page=100), path)
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 2])
  got = []
  with pytest.raises(DumpError) as e:
    with open(path, "rb") as f:
      for page in w.iter_pages(f, path):
        got.append(page)
  assert e.value.reason == "truncated_bz2" and e.value.source == path
  assert len(got) < 300


def test_malformed_xml_in_one_stream(tmp_path):
  specs = [PageSpec(f"Page {i}", f"text {i}", page_id=i + 1) for i in range(9)]
  streams = ["".join(page_xml(s, s.page_id) for s in specs[k:k + 3]) for k in (0, 3, 6)]
  streams[1] = streams[1].replace("<title>Page 4</title>", "<title>Page 4")
  path = str(tmp_path / "bad-multistream.xml.bz2")
  offsets = raw_multistream(path, streams)
  pages, errors = read_ranges(path, multistream_index.plan_splits(offsets, os.path.getsize(path)))
  assert [(e.reason, e.source) for e in errors] == [("malformed_xml", f"{path}@{offsets[1]}")]
  assert isinstance(errors[0], ValueError)
  assert "1 pages of this stream were read" in str(errors[0])
  assert [p.title for p in pages] == ["Page 0", "Page 1", "Page 2", "Page 3", "Page 6", "Page 7",
                                      "Page 8"]
  # Without on_error the first damaged stream raises (after the pages before it).
  got = []
  with open(path, "rb") as f:
    with pytest.raises(DumpError) as e:
      for page in w.iter_pages_in_range(f, path, offsets[0], os.path.getsize(path)):
        got.append(page.title)
  assert e.value.reason == "malformed_xml" and got == ["Page 0", "Page 1", "Page 2", "Page 3"]
  # A whole-file read of the same dump stops there too.
  got = []
  with pytest.raises(DumpError) as e:
    with open(path, "rb") as f:
      for page in w.iter_pages(f, path):
        got.append(page.title)
  assert e.value.reason == "malformed_xml" and got == ["Page 0", "Page 1", "Page 2", "Page 3"]


def test_corrupt_stream_resynchronises(tmp_path):
  specs = [PageSpec(f"Page {i}", f"text {i}", page_id=i + 1) for i in range(12)]
  streams = ["".join(page_xml(s, s.page_id) for s in specs[k:k + 3]) for k in (0, 3, 6, 9)]
  path = str(tmp_path / "corrupt-multistream.xml.bz2")
  offsets = raw_multistream(path, streams)
  with open(path, "r+b") as f:
    f.seek(offsets[1] + 10)
    f.write(b"\x00" * 16)
  pages, errors = read_ranges(path, [(offsets[0], os.path.getsize(path))])
  assert [(e.reason, e.source) for e in errors] == [("corrupt_bz2", f"{path}@{offsets[1]}")]
  assert [p.title for p in pages] == [f"Page {i}" for i in (0, 1, 2, 6, 7, 8, 9, 10, 11)]
  assert [p.source_id for p in pages][3] == f"{path}@{offsets[2]}#7"


def test_trailer_inside_last_page_stream(tmp_path):
  specs = [PageSpec(f"Page {i}", f"text {i}", page_id=i + 1) for i in range(4)]
  streams = ["".join(page_xml(s, s.page_id) for s in specs[:2]),
             "".join(page_xml(s, s.page_id) for s in specs[2:]) + "</mediawiki>\n"]
  path = str(tmp_path / "t-multistream.xml.bz2")
  offsets = raw_multistream(path, streams, trailer=False)
  pages, errors = read_ranges(path, multistream_index.plan_splits(offsets, os.path.getsize(path)))
  assert errors == [] and [p.page_id for p in pages] == [1, 2, 3, 4]
  assert [p.page_id for p in read_all(path)] == [1, 2, 3, 4]


@pytest.mark.parametrize("content, reason", [
    (b"hello, this is not XML at all", "not_a_dump"),
    (b"<html><body>a web page</body></html>", "not_a_dump"),
    (b'<mediawiki xmlns="x"><page><title>A</page></mediawiki>', "malformed_xml"),
    (b'<mediawiki xmlns="x"><siteinfo><case>x</siteinfo>', "malformed_xml"),
])
def test_not_a_dump(tmp_path, content, reason):
  path = str(tmp_path / "x.xml.bz2")
  with open(path, "wb") as f:
    f.write(bz2.compress(content))
  # read_siteinfo stops at the first <page>, before the damage of the third case.
  for read in (read_all, siteinfo_of) if b"<page>" not in content else (read_all,):
    with pytest.raises(DumpError) as e:
      read(path)
    assert e.value.reason == reason and e.value.source == path


def test_not_bz2(tmp_path):
  path = str(tmp_path / "x.bin")
  with open(path, "wb") as f:
    f.write(b"\x00\x01binary")
  with pytest.raises(DumpError) as e:
    read_all(path)
  assert e.value.reason == "not_a_dump"


# --- real samples -----------------------------------------------------------------------------

def sample(name):
  path = os.path.join(SAMPLES, name)
  if not os.path.exists(path):
    pytest.skip(f"{path} is not present")
  return path


def test_sample_testcorpus():
  path = sample("testcorpus.xml.bz2")
  info = siteinfo_of(path)
  assert info.lang == "en" and info.case == "first-letter"
  assert (0, "") in info.namespaces and (2302, "Gadget definition") in info.namespaces
  assert info.names()["book talk"] == 109
  pages = read_all(path)
  assert [p.title for p in pages] == [f"Article{i}" for i in range(1, 10)]
  assert all(p.namespace == 0 and p.text.strip() and p.redirect is None for p in pages)
  assert pages[0].page_id == 1 and pages[0].revision_id == 631144794
  assert '[[system]], "user".<ref name="EB1910"/>' in pages[1].text


def test_sample_table_markup():
  path = sample("enwiki-table-markup.xml.bz2")
  assert siteinfo_of(path) is None
  pages = read_all(path)
  assert [p.title for p in pages] == [
      "Constructive vote of no confidence", "List of Prison Break characters",
      "Academy Award for Best Production Design", "Economy of Estonia", "Brahui language"]
  assert all(p.namespace == 0 and len(p.text) > 1000 for p in pages)
  assert pages[0].page_id == 217916 and pages[0].source_id == f"{path}#217916"
  assert pages[0].text.startswith("The '''constructive vote of no confidence''' (in German:")


# --- bounded memory ---------------------------------------------------------------------------

MEASURE = textwrap.dedent("""
    import resource, sys
    from pipelines.datasets.wikipedia import reader as w
    n = 0
    with open(sys.argv[1], "rb") as f:
      for page in w.iter_pages(f, sys.argv[1]):
        n += 1
    print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
""")


@pytest.mark.slow
def test_iter_pages_memory_is_bounded(tmp_path):
  rss = {}
  for n in (700, 7000):  # ~3 MB and ~30 MB of XML
    path = str(tmp_path / f"m{n}.xml.bz2")
    write_dump(generate_pages(n, seed=5), path)
    out = subprocess.run([sys.executable, "-c", MEASURE, path], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()
    assert int(out[0]) == n
    rss[n] = int(out[1]) / 1024  # MB
  with bz2.open(str(tmp_path / "m7000.xml.bz2")) as f:
    assert sum(len(b) for b in iter(lambda: f.read(1 << 20), b"")) > 28e6
  assert rss[7000] - rss[700] < 40, rss


# --- the generator ----------------------------------------------------------------------------

@pytest.mark.slow
def test_generate_pages_is_deterministic_and_realistic():
  pages = list(generate_pages(2000, seed=7, words_per_page=150))
  assert pages == list(generate_pages(2000, seed=7, words_per_page=150))
  assert pages[:50] != list(generate_pages(50, seed=8, words_per_page=150))
  titles = [p.title for p in pages]
  assert len(set(titles)) == 2000
  assert [p.page_id for p in pages[:3]] == [10, 13, 16]
  redirects = [p for p in pages if p.redirect is not None]
  disambiguation = [p for p in pages if p.title.endswith(" (disambiguation)")]
  other = [p for p in pages if p.namespace != 0]
  assert 160 <= len(redirects) <= 240
  assert 30 <= len(disambiguation) <= 90 and 30 <= len(other) <= 90
  articles = {p.title for p in pages if p.namespace == 0 and p.redirect is None}
  for p in redirects:
    assert p.redirect in articles and p.text.startswith(f"#REDIRECT [[{p.redirect}]]")
  assert all("{{disambiguation}}" in p.text for p in disambiguation)
  prefixes = {1: "Talk:", 6: "File:", 10: "Template:", 14: "Category:"}
  assert {p.namespace for p in other} == set(prefixes)
  assert all(p.title.startswith(prefixes[p.namespace]) for p in other)
  text = "".join(p.text for p in pages)
  for feature in ("{{Infobox", "<ref>{{cite web|", "{| class=\"wikitable\"", "[[File:",
                  "|thumb|", "[[Category:", "\n* [[", "<!--", "== ", "]]s ", "'''", "R&D"):
    assert feature in text, feature
  assert any("\u4e00" <= c <= "\u9fff" for c in text) and "🚀" in text
  redirect_titles = {p.title for p in redirects}
  assert any(f"[[{t}]]" in text or f"[[{t}|" in text for t in redirect_titles)


def test_write_dump_index_and_cli(tmp_path, capsys):
  assert synth.index_path_for("a/enwiki-x-multistream.xml.bz2") == (
      "a/enwiki-x-multistream-index.txt.bz2")
  assert synth.index_path_for("a/b.xml.bz2") == "a/b.xml.bz2.index.txt.bz2"
  path = str(tmp_path / "enwiki-cli-pages-articles-multistream.xml.bz2")
  synth.main(["--pages", "120", "--output", path, "--multistream", "--pages_per_stream", "25",
              "--words_per_page", "50", "--seed", "2"])
  out = capsys.readouterr().out.splitlines()
  index = str(tmp_path / "enwiki-cli-pages-articles-multistream-index.txt.bz2")
  with bz2.open(path) as f:
    size = len(f.read())
  assert out == [path, index, f"{size / 1e6:.1f} MB uncompressed, 120 pages"]
  lines = bz2.decompress(open(index, "rb").read()).decode().splitlines()
  pages = read_all(path)
  assert [int(line.split(":")[1]) for line in lines] == [p.page_id for p in pages]
  assert [line.split(":", 2)[2] for line in lines] == [p.title for p in pages]
  assert len(index_offsets(index)) == 5
  specs = list(generate_pages(120, seed=2, words_per_page=50))
  assert [(p.title, p.text, p.namespace, p.page_id, p.redirect) for p in pages] == [
      (s.title, s.text, s.namespace, s.page_id, s.redirect) for s in specs]
  synth.main(["--pages", "10", "--output", str(tmp_path / "s.xml.bz2"), "--nositeinfo"])
  assert siteinfo_of(str(tmp_path / "s.xml.bz2")) is None
  assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "s.xml.bz2")
