"""The plain-text books reader: Gutenberg header/footer removal, paragraphs and offsets, and the
real PG-19 / NarrativeQA samples (skipped when ../shared/samples is absent).  Decoding and
paragraph rules: tests/pipelines/text/test_plain_text.py."""

import os

import pytest

from pipelines.document import BadInput, Paragraph
from pipelines.datasets.books import reader as books
from pipelines.text import plain_text

REPO = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
SAMPLES = os.path.join(REPO, "..", "shared", "samples")


def sample(*parts):
  path = os.path.join(SAMPLES, *parts)
  if not os.path.exists(path):
    pytest.skip(f"sample {path} not present")
  with open(path, "rb") as f:
    return path, f.read()


def texts(doc):
  return [doc.text[p.begin:p.end] for p in doc.paragraphs]


# ---------------------------------------------------------------------------------------------
# strip_gutenberg

BODY = ("Chapter I\n"
        "\n"
        "It was a dark night; Project Gutenberg was not yet invented.\n"
        "\n"
        "The end.\n")


@pytest.mark.parametrize("header,footer", [
    ("*** START OF THIS PROJECT GUTENBERG EBOOK MOBY DICK ***",
     "*** END OF THIS PROJECT GUTENBERG EBOOK MOBY DICK ***"),
    ("*** START OF THE PROJECT GUTENBERG EBOOK THE TIME MACHINE ***",
     "*** END OF THE PROJECT GUTENBERG EBOOK THE TIME MACHINE ***"),
    ("***START OF THE PROJECT GUTENBERG EBOOK EMMA***",
     "End of the Project Gutenberg EBook of Emma, by Jane Austen"),
    ("  **  start  of   the project gutenberg  e-text  x **",
     "End of Project Gutenberg's Emma, by Jane Austen"),
    ("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*",
     "END OF THE PROJECT GUTENBERG EBOOK EMMA"),
    ("*END THE SMALL PRINT! FOR PUBLIC DOMAIN EBOOKS*Ver.02/11/02*END*",
     "            *** END OF THE PROJECT GUTENBERG EBOOK EMMA ***"),
])
def test_strip_each_marker_style(header, footer):
  text = ("The Project Gutenberg EBook of Emma, by Jane Austen\n"
          "\n"
          "Release Date: August, 1994 [EBook #158]\n"
          f"{header}\n"
          "\n"
          "Produced by Jane Doe and the Online\n"
          "Distributed Proofreading Team\n"
          "\n"
          + BODY +
          "\n"
          f"{footer}\n"
          "\n"
          "Updated editions will replace the previous one.\n"
          "*** END: FULL LICENSE ***\n")
  body, found_header, found_footer = books.strip_gutenberg(text)
  assert (found_header, found_footer) == (True, True)
  assert body == "\n\n" + BODY
  assert body.strip().split("\n")[0] == "Chapter I"
  assert body.strip().split("\n")[-1] == "The end."


def test_strip_header_only_and_footer_only():
  body, h, f = books.strip_gutenberg("Licence blah\n*** START OF THE PROJECT GUTENBERG EBOOK X "
                                     "***\nFirst line.\nLast line.")
  assert (body, h, f) == ("First line.\nLast line.", True, False)
  body, h, f = books.strip_gutenberg("First line.\nLast line.\n\n"
                                     "End of the Project Gutenberg EBook of X, by Y\n\n***")
  assert (body, h, f) == ("First line.\nLast line.\n", False, True)


def test_strip_start_marker_wrapped_onto_two_lines():
  text = ("Header\n*** START OF THIS PROJECT GUTENBERG EBOOK THE\nTIME MACHINE ***\n\nBody.\n"
          "*** END OF THIS PROJECT GUTENBERG EBOOK THE TIME MACHINE ***\n")
  assert books.strip_gutenberg(text) == ("\nBody.", True, True)


def test_strip_takes_the_last_start_marker_of_the_header():
  text = ("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n"
          "More header.\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nBody.")
  assert books.strip_gutenberg(text) == ("Body.", True, False)


def test_strip_drops_etext_credit_but_only_near_the_header():
  text = ("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n"
          "This etext was produced by Judy Boss.\n\nCHAPTER 1\n\nText.\n")
  assert books.strip_gutenberg(text) == ("\n\nCHAPTER 1\n\nText.\n", True, False)
  lines = "\n".join(f"line {i}" for i in range(12))
  late = f"*** START OF THE PROJECT GUTENBERG EBOOK X ***\n{lines}\n\nProduced by Nobody.\n"
  assert books.strip_gutenberg(late) == (f"{lines}\n\nProduced by Nobody.\n", True, False)


def test_strip_without_markers_leaves_text_unchanged():
  text = "Produced by Someone\n\nThe book mentions Project Gutenberg here.\n\nEnd.\n"
  assert books.strip_gutenberg(text) == (text, False, False)
  assert books.strip_gutenberg("") == ("", False, False)


def test_markers_quoted_in_the_middle_of_a_long_book_are_kept():
  filler = [f"Line {i} of the story." for i in range(2000)]
  middle = ["*** START OF THE PROJECT GUTENBERG EBOOK, she read aloud.",
            "End of the Project Gutenberg EBook of nothing, he replied."]
  text = "\n".join(filler + middle + filler)
  assert books.strip_gutenberg(text) == (text, False, False)
  # The same lines near the ends do count.
  text = "\n".join(middle[:1] + filler + middle[1:])
  assert books.strip_gutenberg(text) == ("\n".join(filler), True, True)


# ---------------------------------------------------------------------------------------------
# parse_book

BOOK = (b"*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
        b"Produced by A. Person\r\n\r\n"
        b"CHAPTER I\r\n\r\n"
        b"It was the best  of times,\r\nit was the worst\tof times.\r\n  \r\n"
        b"Caf\xc3\xa9.\r\n\r\n"
        b"*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\nlicence\r\n")


def test_parse_book_offsets_id_and_source():
  doc = books.parse_book(BOOK, "gs://bucket/pg19/train/10006.txt")
  assert doc.id == "10006"
  assert doc.source_id == "gs://bucket/pg19/train/10006.txt"
  assert doc.text == ("CHAPTER I\n\nIt was the best of times, it was the worst of times."
                      "\n\nCafé.")
  assert doc.paragraphs == (Paragraph(title="", begin=0, end=9),
                            Paragraph(title="", begin=11, end=63),
                            Paragraph(title="", begin=65, end=70))
  assert texts(doc) == ["CHAPTER I", "It was the best of times, it was the worst of times.",
                        "Café."]
  assert doc.mentions == () and doc.question is None


def test_parse_book_explicit_id_and_stem_rules():
  assert books.parse_book(b"x", "/a/b/12204.txt", document_id="pg-12204").id == "pg-12204"
  assert books.parse_book(b"x", "/a/b/72ddeff1.content").id == "72ddeff1"
  assert books.parse_book(b"x", "book").id == "book"


def test_parse_book_with_stats():
  doc, stats = books.parse_book_with_stats(BOOK, "x/1.txt")
  assert stats == {"books/encoding/utf-8": 1, "books/bytes": len(BOOK),
                   "books/gutenberg_header_removed": 1, "books/gutenberg_footer_removed": 1,
                   "books/gutenberg_credit_removed": 1, "books/paragraphs": 3,
                   "books/characters": 70}
  _, stats = books.parse_book_with_stats(b"caf\xe9", "x/2.txt")
  assert stats == {"books/encoding/cp1252": 1, "books/bytes": 4,
                   "books/gutenberg_header_removed": 0, "books/gutenberg_footer_removed": 0,
                   "books/gutenberg_credit_removed": 0, "books/paragraphs": 1,
                   "books/characters": 4}


@pytest.mark.parametrize("data", [
    b"",
    b"  \r\n\t\r\n\r\n   ",
    (b"Licence\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\n  \r\n"
     b"*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\nMore licence.\r\n"),
])
def test_parse_book_rejects_empty_books(data):
  with pytest.raises(BadInput) as e:
    books.parse_book(data, "dir/empty.txt")
  assert e.value.reason == "empty_book"


def test_two_million_character_book_parses_whole():
  # The size of a long book: every paragraph kept with exact offsets (speed is not asserted
  # here; tests check behaviour, benchmarks/ measure time).
  para = ("It was a bright cold day in April, and the clocks were striking thirteen.\n" * 8)
  body = "\n".join([para] * 3500)
  data = ("*** START OF THE PROJECT GUTENBERG EBOOK BIG ***\n\n" + body
          + "\n*** END OF THE PROJECT GUTENBERG EBOOK BIG ***\n").encode("utf-8")
  assert len(body) > 2_000_000
  doc = books.parse_book(data, "big.txt")
  assert len(doc.paragraphs) == 3500
  expected = " ".join(para.strip().split("\n"))
  assert all(doc.text[p.begin:p.end] == expected for p in doc.paragraphs)


# ---------------------------------------------------------------------------------------------
# Real samples.  The PG-19 files have no Gutenberg header (PG-19 removed it), but still start
# with a "Produced by ..." credit and end with "End of the Project Gutenberg EBook of ..." and
# "***".

FIAMMETTA_LAST = (
    "Why do I take such pleasure in the mere words which I am now setting "
    "down? It is, I say, because I am forced to express the gratitude I then "
    "felt to the holy goddess who was the promiser and bestower of Love's "
    "delights. Ah, how often did I visit her altars and offer incense, "
    "crowned with a garland of her favorite foliage! How often did I think "
    "scornfully of the counsels of my aged nurse! Nay, furthermore, being "
    "elated far more than all my other companions, how often did I disparage "
    "their loves, saying within myself: \"No one is loved as I am loved, no "
    "one loves a youth as matchless as the youth I love, no one realizes such "
    "delights from love as I!\" In short, I counted the world as nothing in "
    "comparison with my love. It seemed to me that my head touched the skies, "
    "and that nothing was lacking to the culmination of my ecstatic bliss. "
    "Betimes the idea flashed on my mind that I must disclose to others the "
    "occasion of my transports, for surely, I would reflect, it would be a "
    "delight to others to hear of that which has brought such delight to me! "
    "But thou, O Shame, on the one side, and thou, O Fear, on the other, did "
    "hold me back: the one threatening me with eternal infamy; the other with "
    "loss of that which hostile Fortune was soon afterward to tear from me. "
    "In such wise then, did I live for some time, for it was then pleasing to "
    "Love that I should live in this manner; and, in good sooth, so blithely "
    "and joyously were these days spent that I had little cause to envy any "
    "lady in the whole world, never imagining that the delight wherewith my "
    "heart was filled to overflowing, was to nourish the root and plant of my "
    "future misery, as I now know to my fruitless and never-ending sorrow.")

HARPERS_LAST = (
    "HARPER'S YOUNG PEOPLE _and_ HARPER'S WEEKLY _will be sent to any address "
    "for one year, commencing with the first number of_ HARPER'S WEEKLY _for "
    "January, 1880, on receipt of $5.00 for the two Periodicals_.")

BILLS_LAPSE_LAST = (
    "He took up 'is chest and marched downstairs with it, and about 'arf an "
    "hour arterward the landlady's 'usband came up and set 'em free. As soon "
    "as they'd got the use of their legs back they started out to look for "
    "Sam, but they didn't find 'im for nearly a year, and as for Bill, they "
    "never set eyes on 'im again.")

TIME_MACHINE_LAST = (
    "One cannot choose but wonder. Will he ever return? It may be that he "
    "swept back into the past, and fell among the blood-drinking, hairy "
    "savages of the Age of Unpolished Stone; into the abysses of the "
    "Cretaceous Sea; or among the grotesque saurians, the huge reptilian "
    "brutes of the Jurassic times. He may even now\u2014if I may use the "
    "phrase\u2014be wandering on some plesiosaurus-haunted Oolitic coral reef, or "
    "beside the lonely saline seas of the Triassic Age. Or did he go "
    "forward, into one of the nearer ages, in which men are still men, but "
    "with the riddles of our own time answered and its wearisome problems "
    "solved? Into the manhood of the race: for I, for my own part, cannot "
    "think that these latter days of weak experiment, fragmentary theory, "
    "and mutual discord are indeed man\u2019s culminating time! I say, for my own "
    "part. He, I know\u2014for the question had been discussed among us long "
    "before the Time Machine was made\u2014thought but cheerlessly of the "
    "Advancement of Mankind, and saw in the growing pile of civilisation "
    "only a foolish heaping that must inevitably fall back upon and destroy "
    "its makers in the end. If that is so, it remains for us to live as "
    "though it were not so. But to me the future is still black and blank\u2014is "
    "a vast ignorance, lit at a few casual places by the memory of his "
    "story. And I have by me, for my comfort, two strange white "
    "flowers\u2014shrivelled now, and brown and flat and brittle\u2014to witness that "
    "even when mind and strength had gone, gratitude and a mutual tenderness "
    "still lived on in the heart of man.")


@pytest.mark.parametrize(
    "parts,doc_id,encoding,header,footer,credit,first,last,count", [
        (("books", "pg19", "train", "10006.txt"), "10006", "utf-8", 0, 1, 1,
         "LA FIAMMETTA", FIAMMETTA_LAST, 65),
        (("books", "pg19", "validation", "28213.txt"), "28213", "utf-8", 0, 1, 1,
         "[Illustration: HARPER'S", HARPERS_LAST, 186),
        (("books", "pg19", "test", "12204.txt"), "12204", "utf-8", 0, 1, 1,
         "ODD CRAFT", BILLS_LAPSE_LAST, 136),
        (("narrativeqa", "stories", "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58.content"),
         "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58", "utf-8", 1, 1, 0,
         "The Time Machine", TIME_MACHINE_LAST, 328),
        (("narrativeqa", "tmp", "0029bdbe75423337b551e42bb31f9a102785376f.content"),
         "0029bdbe75423337b551e42bb31f9a102785376f", "utf-8-sig", 0, 0, 0,
         "Title: Percival Keene",
         "A few miles from the town of Southampton there is an old mansion-house, which has "
         "been for centuries known as Madeline Hall, in the possession of the de Versely "
         "family. It is a handsome building, surrounded by a ...", 3),
    ])
def test_real_samples(parts, doc_id, encoding, header, footer, credit, first, last, count):
  path, data = sample(*parts)
  doc, stats = books.parse_book_with_stats(data, path)
  paras = texts(doc)
  assert doc.id == doc_id
  assert stats[f"books/encoding/{encoding}"] == 1
  assert stats["books/gutenberg_header_removed"] == header
  assert stats["books/gutenberg_footer_removed"] == footer
  assert stats["books/gutenberg_credit_removed"] == credit
  assert (paras[0], paras[-1], len(paras)) == (first, last, count)
  assert doc.text == "\n\n".join(paras)
  assert "\r" not in doc.text and "\ufeff" not in doc.text
  assert not any("gutenberg" in p.lower() for p in paras)
  assert not any(p.lower().startswith("produced by") for p in paras)


def test_time_machine_keeps_the_story_and_drops_the_licence():
  _, data = sample("narrativeqa", "stories", "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58.content")
  text, encoding = plain_text.decode_text(data)
  body, header, footer = books.strip_gutenberg(text)
  assert (encoding, header, footer) == ("utf-8", True, True)
  assert "PROJECT GUTENBERG" in text and "PROJECT GUTENBERG" not in body.upper()
  assert body.lstrip().startswith("The Time Machine\n\nAn Invention\n\nby H. G. Wells")
  assert body.rstrip().endswith("still lived on in the heart of man.")
  paras = plain_text.paragraphs(body)
  assert paras[2:5] == ["by H. G. Wells", "CONTENTS", "I Introduction II The Machine III "
                        "The Time Traveller Returns IV Time Travelling V In the Golden Age VI "
                        "The Sunset of Mankind VII A Sudden Shock VIII Explanation IX The "
                        "Morlocks X When Night Came XI The Palace of Green Porcelain XII In "
                        "the Darkness XIII The Trap of the White Sphinx XIV The Further Vision "
                        "XV The Time Traveller\u2019s Return XVI After the Story Epilogue"]
