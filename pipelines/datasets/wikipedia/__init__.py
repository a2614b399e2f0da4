"""The Wikipedia dataset (XML dumps): the dump reader (``reader``), the page rules (``pages``), the
Beam stages that read and parse a dump (``dump``) and the spec (``dataset``)."""
