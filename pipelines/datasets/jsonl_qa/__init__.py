"""The ``jsonl_qa`` dataset: users' own long-document extractive QA data in JSON lines
(:mod:`schemas.jsonl_qa`): its reader (``reader``), spec (``dataset``) and a sample
(``sample/``)."""
