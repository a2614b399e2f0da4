r"""The data half of the memory-use check: generated biographies whose hyperlinked entities
recur across the segments of each document, written as MediaWiki dumps and turned into
pretraining records by the real ``python -m pipelines wikipedia`` job, train and held-out.

  python -m benchmarks memory_corpus --out_dir /tmp/memcorpus [--seed 0] [--train_docs 600]
      [--heldout_docs 100] [--seq_length 128] [--segments_per_pack 16] [--no_samples]

What a later step does with it: pretrain a tiny ReadTwice(E) and its E(SS) ablation (each
segment reads only its own memories) on ``train/`` and compare masked-LM accuracy on the tokens
of masked entity mentions in ``heldout/``.

Design (why the entity tokens are a test of reading OTHER segments' memories):

* Every document is a Wikipedia-style biography of a fictional person (lead, Early life,
  Career, Later life, Legacy; an infobox, refs and categories that the job's cleaning removes).
  Its cast is 5-7 people, 2-3 places and 1-2 organisations, each linked on every mention
  (``[[Full Name]]``, ``[[Full Name|Surname]]``, ``[[Kelbury]]``, the ``[[Dunmore Foundry]]``);
  the subject is mentioned by its full name (a self mention of the page title).
* Names are drawn per document from shared pools (English first names x surnames, place-name
  parts, surname + kind for organisations) and every surface name is used by ONE entity of the
  whole corpus: held-out documents are about new entities (no held-out entity's name is the
  name of a training entity; the first names, surnames and name parts are shared, as they must
  be for a model to produce them), so names cannot be memorised, only read from the document.
* Each entity has three cues that are unique within its document and random across documents:
  a person's relation to the subject ("his mentor"), occupation ("the engraver") and a
  descriptor ("a former sailor"); a place's kind, region and role in the subject's life ("where
  he was born"); an organisation's descriptor, role ("which published his first pamphlet") and
  location (a linked place).  Every mention sentence carries two of the three, so any two
  mentions of an entity share at least one cue, and the cue identifies the entity within its
  document but says nothing about its name (the cue-name pairing is random per document).
* Sentences that mention a cast member pick one not mentioned in the previous three such
  sentences (least mentioned first), so an entity recurs across the document (~3-5 mentions,
  in different segments) but rarely twice in one 128-token segment.

So when every mention of an entity in a segment is masked (whole-entity masking), the segment
itself holds the cue but not the name: E(SS) can only guess from name priors (frequent first
names and surnames, the kind word of an organisation, a gendered first name after "his
wife"), while ReadTwice(E) can match the cue against the memories of the entity's unmasked
mentions in other segments, whose first-read states hold both the cue context and the name.
Nothing is hidden from the real model or given only to E: both read the same records; the
entity ids only drive masking and the coreference loss.  Segments do not overlap (``--overlap
0``): with overlap a mention masked in one segment would sit unmasked in its neighbour.  With
per-mention (not whole-entity) masking SS can copy a second, unmasked mention of the same
entity in the segment: the stats report how often that can happen (``same_segment_repeat``,
~15%, two thirds of it the subject, whose name opens every section).

Outputs under ``--out_dir``: ``dumps/`` (the two dumps and ``cast-<split>.jsonl``, each
document's entities with their cues), ``train/`` and ``heldout/`` (pipeline output dirs), and,
when the shared samples exist, ``real_wikipedia/`` (the real enwiki excerpts, as they are) and
``real_books/`` (the PG-19 samples with ``--ner spacy --linker alias`` against
``real_wikipedia/``'s alias table, offline with ``blank:en``): natural text a trainer may mix
in.  ``corpus.json`` holds what :func:`build` returns; the last stdout line is one JSON object
(build seconds as ``value``, the main counts beside it).

Modules: :mod:`.pools` (the name, cue, event and filler pools), :mod:`.corpus` (entities,
biographies, the dumps), :mod:`.build` (the real jobs and the records' statistics);
``benchmarks/experiments/memory_corpus.py`` is the command line.
"""
