"""The NarrativeQA dataset (official CSV layout): its reader (``reader``), the CSV-reading Beam
stages (``stages``) and the spec (``dataset``)."""
