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

* the rc configs concatenate the Wikipedia and the web question files: a row with search
  results is a web question (one document per page), any other a Wikipedia one, as
  :func:`.reader.is_web` decides on the official files (a web question without any search
  result would read as a Wikipedia one);
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

from typing import Any, Dict, List, Sequence

from pipelines.beam.read_parquet import HubSchema
from pipelines.datasets.triviaqa.reader import TEXT_KEY

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


def to_record(row: Dict[str, Any]) -> Dict[str, Any]:
  """One Hub row -> the official datum, pages with their evidence text (module docstring)."""
  datum: Dict[str, Any] = {}
  answer = _answer(row.get("answer"))
  if answer is not None:
    datum["Answer"] = answer
  for hub_key, key, fields in _PAGES:
    pages = _pages(row.get(hub_key), fields)
    if pages or key == "EntityPages":
      datum[key] = pages
  datum.update(Question=row["question"], QuestionId=row["question_id"],
               QuestionSource=row.get("question_source"))
  return datum


SCHEMA = HubSchema(required=("question", "question_id", "entity_pages.filename",
                             "entity_pages.title", "entity_pages.wiki_context",
                             "search_results.filename", "search_results.title",
                             "search_results.search_context"),
                   to_record=to_record)
