"""The contract shared by pipelines/ and model/: record features, versions, manifest format.

Importable without TensorFlow or Beam.
"""
from schemas.records import SCHEMA_VERSION, SchemaVersionError, check_version  # noqa: F401
