"""TriviaQA as the Hugging Face Hub stores it (``mandarjoshi/trivia_qa``, configs ``rc``,
``rc.wikipedia``, ``rc.web``; Parquet) -> the official question datum, with each page's
evidence text inside it, which :mod:`.reader` parses as it parses the official files.

The Hub's rows are made by its loading script (``huggingface/datasets``,
``datasets/trivia_qa/trivia_qa.py``): ``question``, ``question_id``, ``question_source``,
``entity_pages``: Sequence of ``{doc_source, filename, title, wiki_context}``,
``search_results``: Sequence of ``{description, filename, rank (int32), title, url,
search_context}`` (stored column-wise: structs of lists) and ``answer``: ``{aliases,
normalized_aliases (lists), matched_wiki_entity_name, normalized_matched_wiki_entity_name,
normalized_value, type, value}``.  What the script does, and what follows here:

* the rc configs concatenate the question files in sorted order, the web files before the
  Wikipedia ones (``rc``), or hold one domain (``rc.web``, ``rc.wikipedia``).  A web question
  is keyed per page (``QuestionId--Filename``, EntityPages too), as the official evaluation
  keys a web file, even without search results (``tc_276`` of web-dev has none), so the row's
  domain is found (:func:`domain_of_file`, :func:`records_of_file`): from the file's folder
  (``rc.web/``, ``rc.wikipedia/``) or name (``web-*``, ``wikipedia-*``); in a mixed file
  (``rc/``) a row with search results, or before the file's last such row, is a web question,
  any other a Wikipedia one (a web question without search results after the last one that
  has them, at the end of a shard, cannot be told from a Wikipedia one there: use ``rc.web``);
* the evidence text is the file read as UTF-8 text (universal newlines), **stripped** of
  leading and trailing whitespace, as every string of a row is: a file with such whitespace
  gives a document shorter by it than the official path's (the answers' positions shift by
  the leading whitespace);
* a page whose file was missing is left out of the row (the official path reads it as missing);
* test rows (no answer) have ``value == "<unk>"``, no aliases and ``type == ""``: no
  ``Answer``; the official ``HumanAnswers`` (verified sets) are not on the Hub;
* the ``.nocontext`` configs have no ``wiki_context`` / ``search_context``: such a file is
  a ``missing_columns`` dead letter (use ``rc``).

No ``--evidence_dir`` is needed: :mod:`.evidence` uses a page's text when the datum holds it
(:data:`.reader.TEXT_KEY`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Sequence

from pipelines.beam.read_parquet import HubSchema
from pipelines.datasets.triviaqa.reader import TEXT_KEY, WEB, WIKIPEDIA
from pipelines.sources import parquet_rows

NO_ANSWER = "<unk>"
_PAGES = (("entity_pages", "EntityPages", (("doc_source", "DocSource"), ("filename", "Filename"),
                                           ("title", "Title"), ("wiki_context", TEXT_KEY))),
          ("search_results", "SearchResults", (("description", "Description"),
                                               ("filename", "Filename"), ("rank", "Rank"),
                                               ("title", "Title"), ("url", "Url"),
                                               ("search_context", TEXT_KEY))))


def _pages(columns: Any, fields: Sequence) -> List[Dict[str, Any]]:
  """A struct of lists -> the official page objects (a missing struct: none)."""
  if not columns:
    return []
  cols = {ours: columns.get(hub) or [] for hub, ours in fields}
  n = {len(c) for c in cols.values()}
  if len(n) != 1:
    raise ValueError(f"page columns {[h for h, _ in fields]} have different lengths")
  return [{k: v[i] for k, v in cols.items()} for i in range(n.pop())]


def _answer(answer: Any) -> Dict[str, Any] | None:
  if not answer:
    return None
  aliases = answer.get("aliases") or []
  if answer.get("value") == NO_ANSWER and not aliases and not answer.get("type"):
    return None
  return {"Aliases": aliases, "MatchedWikiEntryName": answer.get("matched_wiki_entity_name"),
          "NormalizedAliases": answer.get("normalized_aliases") or [],
          "NormalizedMatchedWikiEntryName": answer.get("normalized_matched_wiki_entity_name"),
          "NormalizedValue": answer.get("normalized_value"), "Type": answer.get("type"),
          "Value": answer.get("value")}


def to_record(row: Dict[str, Any], web: Optional[bool] = None) -> Dict[str, Any]:
  """One Hub row -> the official datum, pages with their evidence text (module docstring).
  ``web``: whether the row is a web question (then the datum has ``SearchResults``, maybe
  empty, as in the official web files); None: a row with search results is one."""
  datum: Dict[str, Any] = {}
  answer = _answer(row.get("answer"))
  if answer is not None:
    datum["Answer"] = answer
  for hub_key, key, fields in _PAGES:
    pages = _pages(row.get(hub_key), fields)
    if pages or key == "EntityPages" or (web and key == "SearchResults"):
      datum[key] = pages
  datum.update(Question=row["question"], QuestionId=row["question_id"],
               QuestionSource=row.get("question_source"))
  return datum


_DOMAIN_FOLDERS = {"rc.web": WEB, "rc.wikipedia": WIKIPEDIA}


def domain_of_file(path: str) -> Optional[str]:
  """``web`` or ``wikipedia`` when the file's folder (the Hub's config ``rc.web`` /
  ``rc.wikipedia``) or name (``web-*`` / ``wikipedia-*``, the official files' names) says
  so; None for a file that may mix both (config ``rc``)."""
  parts = [p for p in re.split(r"[/\\]", path) if p]
  for folder in reversed(parts[:-1]):
    if folder in _DOMAIN_FOLDERS:
      return _DOMAIN_FOLDERS[folder]
  name = parts[-1] if parts else ""
  for domain in (WIKIPEDIA, WEB):
    if name.startswith(domain + "-"):
      return domain
  return None


def _rows_before_last_search_result(path: str) -> int:
  """1 + the index of the file's last row with search results (0: none has any), reading
  only the ``search_results.filename`` column."""
  end = 0
  with parquet_rows._open(path) as f:  # pylint: disable=protected-access
    parquet = parquet_rows.open_parquet(f, path, ("search_results.filename",))
    index = 0
    for batch in parquet.iter_batches(columns=["search_results.filename"]):
      for row in batch.column(0).to_pylist():
        index += 1
        if row and row.get("filename"):
          end = index
  return end


def records_of_file(path: str) -> Callable[[int, Dict[str, Any]], Dict[str, Any]]:
  """The file's ``(row index, row) -> datum``, each row read as a web or a Wikipedia question
  as the module docstring says."""
  domain = domain_of_file(path)
  if domain is not None:
    return lambda _index, row: to_record(row, web=domain == WEB)
  web_rows = _rows_before_last_search_result(path)
  return lambda index, row: to_record(row, web=True if index < web_rows else None)


SCHEMA = HubSchema(required=("question", "question_id", "entity_pages.filename",
                             "entity_pages.title", "entity_pages.wiki_context",
                             "search_results.filename", "search_results.title",
                             "search_results.search_context"),
                   to_record=to_record, for_file=records_of_file)
