"""Sweep rows streamed to Parquet and CSV (pyarrow), one batch at a time.

Both files are written beside their final names and moved into place by `close()` (the one
output writer, `compiler/writer.py`), so a reader never sees half a table and an interrupted sweep leaves a complete table of the
points that finished. pyarrow is imported here, only when a sweep writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...compiler.writer import AtomicFile, check_writable
from ...solver.sweep.point import COLUMNS, column

_TYPES = {"int": "int64", "float": "float64", "str": "string", "bool": "bool_"}
TABLE, CSV = "sweep.parquet", "sweep.csv"


def schema(axes: tuple[str, ...]):
    import pyarrow as pa

    fields = [pa.field(column(name), pa.string()) for name in axes]
    fields += [pa.field(name, getattr(pa, _TYPES[kind])()) for name, kind in COLUMNS.items() ]
    return pa.schema(fields)


class TableWriter:
    """`write(rows)` appends a batch to both files; `close()` publishes them."""

    def __init__(self, directory: str | Path, axes: tuple[str, ...]):
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        self.directory = Path(directory)
        self.schema = schema(axes)
        self.rows = 0
        self._files = {name: AtomicFile(self.directory / name) for name in (TABLE, CSV)}
        for name in (TABLE, CSV):
            check_writable(self.directory / name)
        self._parquet = pq.ParquetWriter(str(self._files[TABLE].begin()), self.schema)
        self._csv = pcsv.CSVWriter(str(self._files[CSV].begin()), self.schema)

    def write(self, rows: list[dict]) -> None:
        import pyarrow as pa

        if not rows:
            return
        batch = pa.RecordBatch.from_pylist([{n: _cell(r.get(n)) for n in self.schema.names} for r in rows],
                                           schema=self.schema)
        self._parquet.write_batch(batch)
        self._csv.write_batch(batch)
        self.rows += len(rows)

    def close(self) -> None:
        self._parquet.close()
        self._csv.close()
        for file in self._files.values():
            file.commit()

    def abort(self) -> None:
        for closer in (self._parquet.close, self._csv.close):
            try:
                closer()
            except Exception:  # already failing; the temp files go regardless
                pass
        for file in self._files.values():
            file.discard()


def _cell(value):
    return None if isinstance(value, float) and value != value else value


def iter_rows(directory: str | Path, batch: int = 4096) -> Iterator[list[dict]]:
    """The rows of an earlier sweep's table, a batch at a time (nothing when there is none)."""
    import pyarrow.parquet as pq

    path = Path(directory) / TABLE
    if not path.exists():
        return
    for record_batch in pq.ParquetFile(path).iter_batches(batch_size=batch):
        yield record_batch.to_pylist()


def read_rows(directory: str | Path) -> list[dict]:
    return [row for rows in iter_rows(directory) for row in rows]
