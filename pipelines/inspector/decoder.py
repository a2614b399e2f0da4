"""The tokenizer that decodes the records' token ids, checked against the manifest's."""

from __future__ import annotations

from typing import Any, Dict, Optional

from pipelines.inspector.inspect_error import InspectError


def build_tokenizer(manifest: Optional[Dict[str, Any]] = None, vocab_file: Optional[str] = None,
                    merges_file: Optional[str] = None):
  """The tokenizer that wrote the records; InspectError if it differs from the manifest's.

  With ``vocab_file``/``merges_file`` those files are used; otherwise the packaged GPT-2 BPE,
  which is only accepted when there is no manifest or its tokenizer name says gpt2.
  """
  # pylint: disable-next=g-import-not-at-top
  from pipelines.text.tokenizer import Tokenizer, TokenizerSpec

  described = (manifest or {}).get("tokenizer", {})
  if vocab_file or merges_file:
    try:
      spec = TokenizerSpec(vocab_file, merges_file)
    except ValueError as e:
      raise InspectError(str(e)) from e
  elif manifest is not None and "gpt2" not in str(described.get("name", "")).lower():
    raise InspectError(
        f"The manifest's tokenizer is {described.get('name')!r}, not the packaged GPT-2 BPE: "
        "pass the --vocab_file and --merges_file the records were written with.")
  else:
    spec = TokenizerSpec()
  tokenizer = Tokenizer(spec)
  want = described.get("fingerprint")
  if manifest is not None and want != tokenizer.fingerprint:
    raise InspectError(
        f"Tokenizer mismatch: the records were written with {described.get('name')!r} "
        f"(fingerprint {want}), but the inspector built {tokenizer.name!r} (fingerprint "
        f"{tokenizer.fingerprint}). Pass the --vocab_file/--merges_file used by the pipeline.")
  return tokenizer
