"""MediaWiki title normalisation, namespace tables and redirect targets
(:mod:`pipelines.text.wiki_titles`)."""

from pipelines.text import wiki_titles
from pipelines.text.wiki_titles import Namespaces, Title, normalize_title


# --- normalize_title --------------------------------------------------------------------------

def test_normalize_title_basic_forms():
  assert normalize_title("albert_Einstein") == Title(0, "Albert Einstein")
  assert normalize_title("  Albert \t Einstein  ") == Title(0, "Albert Einstein")
  assert normalize_title("Albert&nbsp;Einstein") == Title(0, "Albert Einstein")
  assert normalize_title("AT&amp;T") == Title(0, "AT&T")
  assert normalize_title("Rock &#39;n&#39; roll") == Title(0, "Rock 'n' roll")
  assert normalize_title("Caf%C3%A9") == Title(0, "Café")
  assert normalize_title("100%25_pure") == Title(0, "100% pure")
  assert normalize_title("Bad%FFbyte") == Title(0, "Bad%FFbyte")  # not UTF-8: kept
  assert normalize_title("iPhone") == Title(0, "IPhone")
  assert normalize_title("ßtraße") == Title(0, "ßtraße")  # upper() is two characters
  assert normalize_title("émile") == Title(0, "Émile")
  assert normalize_title("东京") == Title(0, "东京")
  assert normalize_title("Star Wars: Episode IV") == Title(0, "Star Wars: Episode IV")


def test_normalize_title_namespaces_and_prefixes():
  assert normalize_title("Category:Living people") == Title(14, "Living people")
  assert normalize_title("category : living_people") == Title(14, "Living people")
  assert normalize_title(":Category:X") == Title(14, "X")
  assert normalize_title("Image:Foo.jpg") == Title(6, "Foo.jpg")
  assert normalize_title("File:Foo.jpg") == Title(6, "Foo.jpg")
  assert normalize_title("WP:NPOV") == Title(4, "NPOV")
  assert normalize_title("Project:About") == Title(4, "About")
  assert normalize_title("user talk:Bob") == Title(3, "Bob")
  assert normalize_title("Media:Sound.ogg") == Title(-2, "Sound.ogg")
  assert normalize_title("de:Berlin") is None
  assert normalize_title(":de:Berlin") is None
  assert normalize_title("wikt:house") is None
  assert normalize_title("Commons:Main Page") is None
  assert normalize_title(":Foo") == Title(0, "Foo")
  assert normalize_title("Category:X").full == "Category:X"
  assert normalize_title("image:y.png").full == "File:Y.png"
  assert normalize_title("Foo").full == "Foo"


def test_normalize_title_fragments_and_invalid():
  assert normalize_title("Paris#History") == Title(0, "Paris")
  assert normalize_title("Paris #History") == Title(0, "Paris")
  assert normalize_title("#History") is None
  assert normalize_title("") is None
  assert normalize_title("   ") is None
  assert normalize_title("Category:") is None
  for bad in ("a<b", "a>b", "a[b", "a]b", "a{b", "a}b", "a|b", "{{PAGENAME}}"):
    assert normalize_title(bad) is None, bad


def test_normalize_title_case_sensitive_and_custom_namespaces():
  ns = Namespaces(names={"kategorie": 14, "datei": 6}, first_letter_case=False)
  assert normalize_title("iPhone", ns) == Title(0, "iPhone")
  assert normalize_title("Kategorie:stadt", ns) == Title(14, "stadt")
  assert normalize_title("Category:stadt", ns) == Title(0, "Category:stadt")
  assert Namespaces.default().names["image"] == 6
  assert Namespaces.default().first_letter_case is True


# --- redirects -----------------------------------------------------------------------------

def test_redirect_target():
  rt = wiki_titles.redirect_target
  assert rt("#REDIRECT [[Albert Einstein]]") == Title(0, "Albert Einstein")
  assert rt("#redirect [[albert_einstein#Life|x]]\n{{R from move}}") == Title(0,
                                                                            "Albert einstein")
  assert rt("  #Redirect:[[Foo]]") == Title(0, "Foo")
  assert rt("#REDIRECT[[Category:Cats]]") == Title(14, "Cats")
  assert rt("#REDIRECT [[de:Berlin]]") is None
  assert rt("#REDIRECT [[#Section]]") is None
  assert rt("Some text. #REDIRECT [[Foo]]") is None
  assert rt("#REDIRECT Foo") is None
  assert rt("") is None
