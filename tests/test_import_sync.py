"""An import's result sets are fsynced together before the adopt that shows them (#13), not one by one."""

from __future__ import annotations

import pytest

import labledger
from labledger.errors import StorageError
from labledger.store.jsonl import fsync_files
from labledger.store.ledger import Ledger


def test_staged_result_sets_wait_for_one_sync_before_adopt(tmp_path):
    book = Ledger(tmp_path / "ledger", create=True)
    assert book.deferred_sync is None  # a ledger's own writes fsync themselves
    with book.staging() as stage:
        with labledger.start_run("r", ledger=stage) as run:
            path = run.log_results("s", [{"id": "a", "task": "t", "gold": 1.0, "pred": 0.5}])
        assert stage.deferred_sync == [path.parent / "meta.json", path]
        data = path.read_bytes()
        book.adopt(stage)
        assert stage.deferred_sync == []
    assert book.run(run.id).results_path("s").read_bytes() == data


def test_fsync_files_names_a_file_it_cannot_sync(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    fsync_files([tmp_path / "a", tmp_path / "a"])  # once each
    fsync_files([])
    with pytest.raises(StorageError, match="missing: the file was not written"):
        fsync_files([tmp_path / "a", tmp_path / "missing"])
