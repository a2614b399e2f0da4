"""The books dataset (plain-text books, one per file): its reader (``reader``) and spec
(``dataset``)."""
