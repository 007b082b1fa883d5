"""The index path of a scan: the rows a scalar index names are taken from their row groups (a mixin of `Scan`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format.bases import data_file_location
from mvcc_core.io.parquet import (
    MISSING,
    LruCache,
    dictionary_columns,
    parquet_footer,
    read_row_groups,
)
from mvcc_core.read.index_lookup import covered, lookup
from mvcc_core.read.index_planner import IndexChoice, choose_index
from mvcc_core.read.scan_host import ScanHost

# `Scan.to_table` reads only the rows an index names unless they lie in more than this fraction of the (at
# least this many) files the index covers: then a scan of every file, filtered, is cheaper than a take per file.
_INDEX_MIN_FILES = 16
_INDEX_MAX_HIT_FRACTION = 0.5
# The index choice of a filter, per filter, schema and the manifest's indices.
_CHOICES = LruCache(256)


class IndexedReads:
    """Scan's reads through a scalar index: `Scan` mixes this in; the methods use its attributes."""

    # the scan's choice (False: not chosen yet) and what the chosen index names, set by `Scan.__init__`
    _index: IndexChoice | None | Literal[False]
    _addresses: np.ndarray | None

    def _index_choice(self: ScanHost) -> IndexChoice | None:
        """The index answering part of the filter (chosen once per scan, cached per filter and manifest), or None."""
        if self._index is not False:
            return self._index
        choice: IndexChoice | None = None
        if self._use_index and self.bound is not None and self.bound.physical and len(self.manifest.indices):
            if self._filter_key is None:  # not cached (too large to keep, or no key): chosen each time
                choice = choose_index(self.bound, self.manifest)
            else:
                key = (
                    self._filter_key,
                    self._schema_key,
                    tuple(i.SerializeToString(deterministic=True) for i in self.manifest.indices),
                )
                cached = _CHOICES.get(key)
                if cached is MISSING:
                    cached = choose_index(self.bound, self.manifest)
                    _CHOICES.put(key, cached)
                choice = cached
        self._index = choice
        return choice

    def _index_addresses(self: ScanHost, choice: IndexChoice) -> np.ndarray:
        """The sorted row addresses the index names for the filter, where those rows are in this version
        (looked up once per scan)."""
        addresses = self._addresses
        if addresses is None:
            addresses = lookup(self.store, choice.index, choice.expr, choice.bounds, choice.value_column)
            moved = frag_reuse.address_map(self.manifest, choice.index)
            if moved:  # built before compactions that deferred remapping: where those rows are now
                addresses = np.sort(moved.translate(addresses))
            self._addresses = addresses
        return addresses

    def _index_pays(self: ScanHost, choice: IndexChoice) -> bool:
        """Whether reading only the rows the index names beats scanning with the filter: not when they lie
        in most of the files the index covers (a merge_insert whose keys spread over the table). Each such
        file is then a take on the calling thread, while a scan reads them whole on the reader threads."""
        cover = covered(choice.index)
        files = sum(1 for f in self.fragments if f.id in cover and len(f.files) == 1)
        if files < _INDEX_MIN_FILES:
            return True
        hit = len(np.unique(self._index_addresses(choice) >> np.uint64(32)))
        return hit <= files * _INDEX_MAX_HIT_FRACTION

    def _indexed(self: ScanHost, choice: IndexChoice) -> Iterator[pa.RecordBatch]:
        """Covered one-file fragments: only the rows the index names are read (then the whole filter
        applies); other fragments are scanned as usual. Manifest order is kept."""
        cover = covered(choice.index)
        addresses = self._index_addresses(choice)
        frag_of = addresses >> np.uint64(32)
        direct: list[pb.DataFragment] = []
        for frag in self.fragments:
            if frag.id not in cover or len(frag.files) != 1:
                direct.append(frag)
                continue
            if direct:
                yield from self._sub_scan(direct).to_batches()
                direct = []
            offsets = addresses[frag_of == frag.id] & np.uint64(0xFFFFFFFF)
            if len(offsets):
                yield from self._take(frag, offsets)
        if direct:
            yield from self._sub_scan(direct).to_batches()

    def _take(self: ScanHost, frag: pb.DataFragment, offsets: np.ndarray) -> Iterator[pa.RecordBatch]:
        """The rows at `offsets` of a one-file fragment, reading only their row groups (footer cached)."""
        names = self._read_names()
        physical = self._physical(names)
        data_file = frag.files[0]
        store, rel = data_file_location(self.store, self.manifest.base_paths, data_file)
        fs, path = store.arrow_filesystem(), store.arrow_path(rel)
        key = (store.scheme, path, data_file.file_size_bytes)
        footer = parquet_footer(fs, key)
        self._check_file(frag, data_file, footer.schema, footer.metadata.num_rows)
        if any(n not in footer.schema.names for n in physical):
            yield from self._sub_scan([frag]).to_batches()
            return
        starts = footer.starts
        offsets = np.sort(offsets.astype(np.int64))
        group_of = np.searchsorted(starts, offsets, side="right") - 1
        groups = [int(g) for g in np.unique(group_of)]
        dictionaries = dictionary_columns(footer, physical, groups)
        table = read_row_groups(fs, key, groups, physical, dictionaries)
        # where each selected row group starts in `table`, then each offset's position there
        sizes = np.diff(starts)
        selected_start = np.zeros(len(sizes), dtype=np.int64)
        selected_start[groups] = np.cumsum([0, *[sizes[g] for g in groups]])[:-1]
        local = selected_start[group_of] + offsets - starts[group_of]
        fields = [self.physical_schema.field(self.table_schema.get_field_index(n)) for n in names]
        taken = table.take(pa.array(local))
        columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(taken.columns, fields, strict=True)]
        table = pa.Table.from_arrays(columns, schema=pa.schema(fields))
        kept = self._keep(table, frag, offsets.astype(np.uint64))
        yield from self._finish(kept, names)
