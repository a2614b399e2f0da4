"""The TriviaQA dataset (rc, Wikipedia and web): its reader (``reader``), the evidence stage
(``evidence``), the answer rules of the official evaluation (``answers``) and the spec
(``dataset``)."""
