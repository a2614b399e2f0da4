"""The HotpotQA dataset: its reader (``reader``) and spec (``dataset``)."""
