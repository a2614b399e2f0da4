"""Text rules the datasets share (pure Python + numpy, no Beam): tokenizer, segmenter, answer
search, ROUGE-L oracle, plain-text decoding and paragraphs, wikitext cleaning and wiki titles."""
