"""``pipelines.sources.parquet_rows``: rows in file order across row groups, nested columns,
Parquet told by name or magic bytes, and the errors of files that are not what is expected."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.sources.parquet_rows import (ParquetError, is_data_error, is_parquet, iter_rows,
                                            missing_columns)

SCHEMA = pa.schema([("id", pa.string()),
                    ("pages", pa.struct([("title", pa.list_(pa.string())),
                                         ("text", pa.list_(pa.string()))])),
                    ("answers", pa.list_(pa.struct([("text", pa.string())])))])


def rows(n):
  return [{"id": f"r{i}", "pages": {"title": [f"t{i}"], "text": [f"x{i}"]},
           "answers": [{"text": f"a{i}"}]} for i in range(n)]


def write(path, n=7, row_group_size=3):
  pq.write_table(pa.Table.from_pylist(rows(n), schema=SCHEMA), str(path),
                 row_group_size=row_group_size)
  return str(path)


def test_rows_come_in_file_order_across_row_groups_and_batches(tmp_path):
  path = write(tmp_path / "a.parquet")
  assert pq.ParquetFile(path).num_row_groups == 3
  assert list(iter_rows(path, ("id", "pages.text"), batch_size=2)) == rows(7)


def test_only_the_wanted_columns_are_read(tmp_path):
  path = write(tmp_path / "a.parquet", n=2)
  assert list(iter_rows(path, columns=("id", "absent"))) == [{"id": "r0"}, {"id": "r1"}]


def test_parquet_is_told_by_name_or_magic_bytes(tmp_path):
  named = write(tmp_path / "a.parquet")
  unnamed = write(tmp_path / "shard-0")
  (tmp_path / "b.json").write_text("[]")
  assert is_parquet(named) and is_parquet(unnamed)
  assert not is_parquet(str(tmp_path / "b.json"))
  assert not is_parquet(str(tmp_path / "missing.json"))


def test_nested_columns_are_found_through_structs_and_lists():
  assert missing_columns(SCHEMA, ("id", "pages.title", "answers.text")) == []
  assert missing_columns(SCHEMA, ("pages.body", "question", "id.x")) == [
      "pages.body", "question", "id.x"]


@pytest.mark.parametrize("content", [b"", b"[{\"_id\": 1}]", b"PAR1 but not really"])
def test_a_file_that_is_not_parquet_is_an_invalid_parquet_error(tmp_path, content):
  path = tmp_path / "x.parquet"
  path.write_bytes(content)
  with pytest.raises(ParquetError) as e:
    list(iter_rows(str(path)))
  assert e.value.reason == "invalid_parquet" and "is not a Parquet file" in e.value.detail


def test_missing_columns_are_named_before_any_row(tmp_path):
  path = write(tmp_path / "a.parquet")
  with pytest.raises(ParquetError) as e:
    next(iter_rows(path, ("id", "question", "pages.wiki_context")))
  assert e.value.reason == "missing_columns"
  assert "no column(s) question, pages.wiki_context" in e.value.detail


def test_an_empty_file_has_no_rows(tmp_path):
  path = str(tmp_path / "empty.parquet")
  pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), path)
  assert list(iter_rows(path, ("id",))) == []


def test_a_damaged_file_gives_the_rows_before_the_damage(tmp_path):
  path = tmp_path / "a.parquet"
  pq.write_table(pa.Table.from_pylist(rows(400), schema=SCHEMA), str(path),
                 row_group_size=200, compression="none")
  meta = pq.ParquetFile(str(path)).metadata
  second = meta.row_group(1).column(0).data_page_offset  # the second row group's first page
  data = bytearray(path.read_bytes())
  data[second:second + 64] = b"\xff" * 64
  path.write_bytes(bytes(data))
  got = []
  with pytest.raises(ParquetError) as e:
    for row in iter_rows(str(path), batch_size=50):
      got.append(row)
  assert e.value.reason == "invalid_parquet"
  assert got == rows(400)[:200]



def test_storage_errors_are_not_data_errors():
  assert not is_data_error(OSError("Connection reset by peer"))
  assert is_data_error(OSError("Couldn't deserialize thrift: Deserializing page header failed."))
