"""``[runner] chunk_size``: chunks of a size other than the stage's own are kept apart, so a resume never mixes two
numberings of the same items (chunk 1 of size 2 is not chunk 1 of size 3)."""

from __future__ import annotations

import polars as pl
import pytest

from calib.study.runner import RunOptions, Stage, run_stages
from calib.study.spec import load_spec
from tests.study.test_run import _spec

USUAL = 2  # the stage's own chunk size in these runs


def _stage(size: int, fail_at: list[int], computed: list[list[int]]) -> Stage:
    async def work(ctx):
        async def chunk(items):
            if fail_at and fail_at[0] in items:
                raise RuntimeError("killed")
            computed.append(items)
            return pl.DataFrame({"item": items})

        return await ctx.chunked(list(range(6)), size, chunk, {"item": pl.Int64()}, usual_size=USUAL)

    return Stage("work", (), "work", "1", lambda spec, options: {}, work)


def _run(tmp_path, size: int, fail_at: list[int], computed: list[list[int]]) -> None:
    (tmp_path / "tiny.toml").write_text(_spec(tmp_path))
    run_stages([_stage(size, fail_at, computed)], load_spec(tmp_path / "tiny.toml"), "", tmp_path / "run",
               options=RunOptions(), resources=None)


def test_a_resume_with_another_chunk_size_computes_every_item_once_at_the_new_size(tmp_path):
    computed: list[list[int]] = []
    with pytest.raises(RuntimeError, match="killed"):
        _run(tmp_path, USUAL, [4], computed)  # chunks [0, 1] and [2, 3] kept, [4, 5] lost
    assert sorted(computed) == [[0, 1], [2, 3]]
    folders = sorted(p.name for p in (tmp_path / "run" / "chunks").iterdir())
    assert len(folders) == 1 and not folders[0].endswith("-n3")
    computed.clear()
    with pytest.raises(RuntimeError, match="killed"):
        _run(tmp_path, 3, [4], computed)  # size 3: [0, 1, 2] done, [3, 4, 5] killed; size 2's chunks not read
    assert computed == [[0, 1, 2]]
    assert sorted(p.name.endswith("-n3") for p in (tmp_path / "run" / "chunks").iterdir()) == [False, True]
    computed.clear()
    _run(tmp_path, 3, [], computed)  # resumed at size 3: only its missing chunk
    assert computed == [[3, 4, 5]]
    table = pl.read_parquet(tmp_path / "run" / "tables" / "work.parquet")
    assert table["item"].to_list() == list(range(6))
    assert not any((tmp_path / "run" / "chunks").glob("work-*"))  # the table is written: every size's chunks go
