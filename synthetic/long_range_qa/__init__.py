r"""Long-range QA documents (issue 16): a question that only information from ANOTHER segment
can answer, written as official HotpotQA JSON and turned into records by the real jobs.

  python -m synthetic.long_range_qa --out_dir /tmp/lrqa [--train_docs 600] [--dev_docs 150]
      [--seed 0] [--segments 6] [--distances 1,2,3,4] [--distractors 3] [--seq_length 128]

What a later step does with it: finetune tiny ReadTwice(E), its E(SS) ablation (each segment
reads only its own memories) and a plain encoder on ``records_train/`` and compare dev EM/F1
(``python -m model.evaluate --task hotpotqa --gold dev.json``) with the chance level.

Design.  A document holds M = distractors + 1 triples (book, author, birth city) of generated
names, each told by two facts of fixed form::

  <Book> was written by <Author>.        <Author> was born in <City>.

The question is ``Where was the author of <Book> born?`` for one triple (the target), answer
its city.  The HotpotQA job prefixes the question to every segment, so:

* a segment holding the target's birth fact sees ``<Author> was born in <City>`` beside other
  birth facts of the same form, and nothing in it says which author wrote the asked-about book:
  every author has a book fact and a birth fact, and the target's book fact lies in another
  segment, ``distance`` segments away (before or after, at random);
* the four kinds of local shortcut are closed: (1) no segment holds both a book fact and a
  birth fact, so a segment can never rule a birth fact out (had the target's book fact a
  distractor's birth fact beside it, or a distractor's book fact its own birth fact, that
  segment would know the city is wrong); (2) all triples are placed by the same random scheme
  (each with a distance drawn from ``distances`` and a random direction), the target being
  just the first, so the target's birth fact has the same distribution of segment, position in
  the segment and neighbours as any distractor's; (3) the answer string occurs exactly once in
  the context (in the target's birth fact), never in the question; (4) names are pseudo-words
  of syllables, each used by one entity of the whole corpus, train and dev names disjoint (by a
  hash of the name, whatever the seeds), so nothing can be memorised, only read.

So a reader that sees one segment at a time can only pick one of the M birth cities at random:
the chance level (EM = 1/M; F1 = the mean official token F1 of the M candidates, above 1/M
where multi-word cities share a word such as "Port").  Reading the target's book fact in one
segment and carrying "the author is X" to the segment of X's birth fact (ReadTwice's memories
of the mentions of X) answers it.

The rest of each segment is neutral filler: Zipf-distributed pseudo-words (each containing a
letter that names never use, so no filler word is a name) and English function words, in
paragraphs with neutral titles.  Facts are placed with the project's own tokenizer and
segmenter, not an estimate: each segment's context budget (``seq_length`` minus the question
prefix) is filled sentence by sentence, every fact wholly inside its intended window (and in
no other), and every document is checked with the real reader, tokenizer, answer labeller and
segmenter (:func:`fact_segments`) and rebuilt when a fact is cut or lands elsewhere.

Entity ids come from the real annotation stage: a MediaWiki dump holds one page per entity
(book, author, city) whose text links the other entities of its document by name
(``[[Nevo Thanmar]]``) without stating any relation (the dump must not leak the facts), so
``python -m pipelines wikipedia`` yields an entity vocabulary and alias table covering every
name, and the HotpotQA job with ``--ner spacy --spacy_model blank:en --linker alias`` labels each
mention in the records with its entity id.

Outputs under ``--out_dir``: ``train.json``, ``dev.json`` (official layout; ``dev.json`` is the
``--gold`` of ``model.evaluate``), ``docs-<split>.jsonl`` (per document: id, distance, fact
segments, candidates), ``chance.json``, ``wiki/`` (the dump), ``entities/`` (the Wikipedia
job's output), ``records_train/`` and ``records_dev/`` (the HotpotQA jobs' outputs), ``logs/``
and ``build.json`` (what :func:`build` returns).  The last stdout line is one JSON object.

Modules: :mod:`.names` (name pools, filler), :mod:`.documents` (parameters, facts, documents),
:mod:`.segments` (where sentences land, by the pipeline's own code), :mod:`.layout` (placing
facts in segments), :mod:`.generate` (documents, checked), :mod:`.chance` (the chance level),
:mod:`.files` (the HotpotQA JSON and the dump), :mod:`.build` (the real jobs, their stats and
the command line).
"""
