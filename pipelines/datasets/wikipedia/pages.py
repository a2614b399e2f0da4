"""A Wikipedia page -> a Document whose hyperlinks are entity mentions (or why it is none).

Rules, in order (each outcome counted by the pipeline under its reason):

* not in the article namespace (0): skipped, ``namespace``;
* a redirect (``<redirect title>`` or ``#REDIRECT [[...]]``): not a document; it becomes a
  ``(title, target)`` pair that resolves links (skipped, ``redirect``; a redirect to another
  namespace is skipped as ``redirect_outside_articles``);
* a disambiguation page (a disambiguation template, or a title ending "(disambiguation)"):
  skipped, ``disambiguation``, unless ``keep_disambiguation``;
* nothing left after cleaning (only templates, tables, ...): skipped, ``empty_after_cleaning``;
* else a Document: id = the page id, text = the clean text (:func:`pipelines.text.wikitext.clean`,
  one parse per page), paragraphs titled by their section (the lead by the page title), and a
  :class:`Mention` per internal link (and per mention of the page's own title), keyed by the
  normalised target title; the job resolves redirects and assigns entity ids over the whole
  dump (:mod:`pipelines.entities.vocabulary`).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, List, Optional, Tuple, Union

from schemas.settings import setting
from pipelines.document import Document, Mention, Paragraph
from pipelines.datasets.wikipedia.reader import Page, SiteInfo
from pipelines.text import wiki_titles, wikitext

DOCUMENT, REDIRECT, SKIP = "document", "redirect", "skip"


@dataclasses.dataclass(frozen=True)
class PageRules:
  keep_disambiguation: bool = setting(False, help="keep disambiguation pages as documents")
  disambiguation_templates: FrozenSet[str] = wikitext.DEFAULT_DISAMBIGUATION_TEMPLATES
  disambiguation_title_suffix: bool = True
  self_mentions: bool = setting(
      True, help="mentions of a page's own title in its text are mentions of its entity")

  def describe(self) -> Dict:
    return {"keep_disambiguation": self.keep_disambiguation,
            "disambiguation_templates": sorted(self.disambiguation_templates),
            "disambiguation_title_suffix": self.disambiguation_title_suffix,
            "self_mentions": self.self_mentions}


def namespaces_of(siteinfo: Optional[SiteInfo]) -> wiki_titles.Namespaces:
  """The wikitext namespace table of a dump (its ``<siteinfo>``, else English defaults): the
  dump's own names, MediaWiki's canonical English names and aliases (``SiteInfo.link_names``)."""
  info = siteinfo or SiteInfo.default()
  return wiki_titles.Namespaces(names=info.link_names(),
                                first_letter_case=info.case != "case-sensitive")


Outcome = Tuple[str, Union[Tuple[Document, List[Tuple[str, str]]], Tuple[str, str], str]]


def convert_page(page: Page, namespaces: wiki_titles.Namespaces, rules: PageRules) -> Outcome:
  """``(DOCUMENT, (document, [(target, anchor), ...]))``, ``(REDIRECT, (title, target))`` or
  ``(SKIP, reason)``."""
  if page.namespace != 0:
    return SKIP, "namespace"
  target = (wiki_titles.normalize_title(page.redirect, namespaces) if page.redirect is not None
            else wiki_titles.redirect_target(page.text, namespaces))
  if page.redirect is not None or target is not None:
    title = wiki_titles.normalize_title(page.title, namespaces)
    if target is None or title is None or target.namespace != 0:
      return SKIP, "redirect_outside_articles"
    return REDIRECT, (title.text, target.text)
  clean = wikitext.clean(page.text, page.title, namespaces, self_mentions=rules.self_mentions)
  if not rules.keep_disambiguation and wikitext.is_disambiguation(
      page.title, clean, rules.disambiguation_templates, rules.disambiguation_title_suffix):
    return SKIP, "disambiguation"
  if not clean.text.strip():
    return SKIP, "empty_after_cleaning"
  paragraphs = tuple(Paragraph(title=section or page.title, begin=b, end=e)
                     for b, e, section in clean.paragraphs)
  mentions = tuple(Mention(link.begin, link.end, entity=link.target) for link in clean.links)
  doc = Document(id=str(page.page_id), text=clean.text, source_id=page.source_id,
                 paragraphs=paragraphs, mentions=mentions)
  return DOCUMENT, (doc, [(link.target, link.anchor) for link in clean.links])
