"""One module per source format; each turns raw records into pipelines.document.Document."""
