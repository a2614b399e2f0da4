"""Plain-text rules (:mod:`pipelines.text.plain_text`): decoding bytes in any encoding, and
hard-wrapped lines joined into paragraphs."""

from pipelines.text import plain_text


# ---------------------------------------------------------------------------------------------
# decode_text


def test_decode_utf8_with_bom_and_crlf():
  assert plain_text.decode_text(b"\xef\xbb\xbfHello\r\nW\xc3\xb6rld\r\n") == (
      "Hello\nWörld\n", "utf-8-sig")


def test_decode_plain_utf8():
  assert plain_text.decode_text("naïve “x”\n".encode("utf-8")) == ("naïve “x”\n", "utf-8")
  assert plain_text.decode_text(b"") == ("", "utf-8")


def test_decode_cp1252():
  assert plain_text.decode_text(b"caf\xe9 \x93quoted\x94") == ("café “quoted”", "cp1252")


def test_decode_latin1_fallback_for_bytes_cp1252_cannot_decode():
  assert plain_text.decode_text(b"a\x81b\xe9\r\n") == ("a\x81bé\n", "latin-1")


def test_decode_utf16_with_bom():
  assert plain_text.decode_text(b"\xff\xfeH\x00\xe9\x00\r\x00\n\x00x\x00") == (
      "Hé\nx", "utf-16")
  assert plain_text.decode_text(b"\xfe\xff\x00H\x00i") == ("Hi", "utf-16")


def test_decode_lone_cr_and_nul():
  assert plain_text.decode_text(b"one\rtwo\r\rthree\r\nfour") == (
      "one\ntwo\n\nthree\nfour", "utf-8")
  assert plain_text.decode_text(b"a\x00b\r\x00\nc") == ("ab\nc", "utf-8")


# ---------------------------------------------------------------------------------------------
# paragraphs


def test_paragraphs_join_wrapped_lines_and_split_on_blank_lines():
  body = ("  The quick brown\n"
          "fox jumps\n"
          "   \n"
          "over the\tlazy  \t dog.\n"
          "\t\n"
          "\n"
          "\n"
          "a well-\n"
          "known fact\n")
  assert plain_text.paragraphs(body) == ["The quick brown fox jumps", "over the lazy dog.",
                                         "a well- known fact"]


def test_paragraphs_of_nothing():
  assert plain_text.paragraphs("") == []
  assert plain_text.paragraphs("\n \n\t\n  ") == []
  assert plain_text.paragraphs("one") == ["one"]
