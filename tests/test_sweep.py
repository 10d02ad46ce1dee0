"""Resumable sweeps (skattn.sweep): backends, resume, kill-and-resume, truncated rows."""

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from skattn.sweep import SweepResult, read_sweep, row_key, run_sweep

GRID = {"alpha": [0.5, 1.0, 2.0], "lam": [0.0, 0.1], "seed": [0, 1]}  # 12 rows


def square(alpha, lam, seed):
    return {"err": alpha * (1 + lam) + seed, "n": int(10 * alpha), "ok": seed == 0,
            "np": np.float32(alpha)}


def fails_on_lam(alpha, lam, seed):
    if lam == 0.1 and seed == 1:
        raise RuntimeError(f"diverged at alpha={alpha}\nsecond line")
    return square(alpha, lam, seed)


def _data_lines(path):
    """Complete data lines of a CSV sweep file (header excluded)."""
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    assert lines[0] == b"key,status,error,wall_time,params,results"
    return lines[1:-1], lines[-1]


def _by_params(rows):
    return {(r["alpha"], r["lam"], r["seed"]): r for r in rows}


@pytest.mark.parametrize("backend, n_jobs", [("sequential", 1), ("joblib", 2)])
def test_every_row_written_once_and_rerun_skips(tmp_path, backend, n_jobs):
    out = tmp_path / "sub" / "sweep.csv"
    res = run_sweep(square, GRID, output=out, backend=backend, n_jobs=n_jobs)
    assert isinstance(res, SweepResult)
    assert (res.n_run, res.n_skipped, res.n_failed, res.n_ok) == (12, 0, 0, 12)
    lines, tail = _data_lines(out)
    assert len(lines) == 12 and tail == b""
    keys = [next(csv.reader([ln.decode()]))[0] for ln in lines]
    assert len(set(keys)) == 12

    # rows come back in grid order with their types
    assert [(r["alpha"], r["lam"], r["seed"]) for r in res.rows] == [
        (a, l, s) for a in GRID["alpha"] for l in GRID["lam"] for s in GRID["seed"]]
    rows = read_sweep(out)
    assert len(rows) == 12
    for r in rows:
        assert r["status"] == "ok" and r["error"] is None
        assert r["err"] == r["alpha"] * (1 + r["lam"]) + r["seed"]
        assert type(r["n"]) is int and type(r["ok"]) is bool and type(r["np"]) is float
        assert type(r["seed"]) is int and type(r["alpha"]) is float
        assert r["wall_time"] >= 0 and r["key"] == row_key(
            {"alpha": r["alpha"], "lam": r["lam"], "seed": r["seed"]})
    assert _by_params(rows) == _by_params(res.rows)

    def never(**_):
        raise AssertionError("a finished row was run again")

    res2 = run_sweep(never, GRID, output=out, backend=backend, n_jobs=n_jobs)
    assert (res2.n_run, res2.n_skipped, res2.n_failed) == (0, 12, 0)
    assert _by_params(res2.rows) == _by_params(rows)
    assert len(_data_lines(out)[0]) == 12


@pytest.mark.parametrize("backend", ["sequential", "joblib"])
def test_failed_rows_recorded_and_retried(tmp_path, backend):
    out = tmp_path / "sweep.csv"
    res = run_sweep(fails_on_lam, GRID, output=out, backend=backend, n_jobs=2)
    assert (res.n_run, res.n_failed) == (12, 3)
    failed = [r for r in read_sweep(out) if r["status"] == "error"]
    assert len(failed) == 3
    for r in failed:
        assert r["error"].startswith("RuntimeError: diverged")
        assert "\\nsecond line" in r["error"]  # one physical line per record
        assert "err" not in r
    assert len(_data_lines(out)[0]) == 12

    res2 = run_sweep(square, GRID, output=out, backend=backend, n_jobs=2)
    assert (res2.n_run, res2.n_skipped, res2.n_failed) == (3, 9, 0)
    rows = read_sweep(out)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    assert len(_data_lines(out)[0]) == 15  # the CSV keeps the failed attempts


def test_bad_return_values_are_error_rows(tmp_path):
    out = tmp_path / "sweep.csv"
    grid = [{"kind": "none"}, {"kind": "list"}, {"kind": "clash"}, {"kind": "good"}]

    def func(kind):
        return {"none": None, "list": {"x": [1, 2]}, "clash": {"status": 1},
                "good": {"x": np.int64(3)}}[kind]

    res = run_sweep(func, grid, output=out, backend="sequential")
    assert res.n_failed == 3
    status = {r["kind"]: (r["status"], r["error"]) for r in res.rows}
    assert status["good"] == ("ok", None)
    assert "must return a dict" in status["none"][1]
    assert "must be a scalar" in status["list"][1]
    assert "reserved" in status["clash"][1]
    assert read_sweep(out)[-1]["x"] == 3


def test_resume_false_reruns_everything(tmp_path):
    out = tmp_path / "sweep.csv"
    run_sweep(square, GRID, output=out, backend="sequential")
    res = run_sweep(lambda alpha, lam, seed: {"err": -1.0}, GRID, output=out,
                    backend="sequential", resume=False)
    assert (res.n_run, res.n_skipped) == (12, 0)
    assert len(_data_lines(out)[0]) == 24  # appended, nothing deleted
    rows = read_sweep(out)
    assert len(rows) == 12 and all(r["err"] == -1.0 and "n" not in r for r in rows)


def test_grid_forms(tmp_path):
    out = tmp_path / "sweep.csv"
    grid = [{"a": np.array([1]), "h": [[8, 8]]},
            {"a": range(2, 3), "h": ([8, 8],)},  # grid dict; list-valued parameter
            {"a": 3, "h": "x"},  # explicit row
            {"a": [1], "h": [[8, 8]]}]  # duplicate of a row above: run once
    res = run_sweep(lambda a, h: {"y": a}, grid, output=out, backend="sequential")
    assert res.n_run == 3
    assert [(r["a"], r["h"]) for r in res.rows] == [(1, [8, 8]), (2, [8, 8]), (3, "x")]
    assert type(res.rows[0]["a"]) is int


def test_bad_arguments(tmp_path):
    out = tmp_path / "s.csv"
    with pytest.raises(ValueError, match="backend"):
        run_sweep(square, GRID, output=out, backend="spark")
    with pytest.raises(ValueError, match="output"):
        run_sweep(square, GRID, output=tmp_path / "s.json")
    with pytest.raises(ValueError, match="grid is empty"):
        run_sweep(square, {}, output=out)
    with pytest.raises(ValueError, match="grid is empty"):
        run_sweep(square, [], output=out)
    with pytest.raises(ValueError, match="grid"):
        run_sweep(square, {"alpha": 0.5, "lam": [0.1]}, output=out)
    with pytest.raises(ValueError, match=r"grid\['alpha'\]"):
        run_sweep(square, {"alpha": []}, output=out)
    with pytest.raises(ValueError, match="grid"):
        run_sweep(square, {"alpha": [object()]}, output=out)
    with pytest.raises(ValueError, match="reserved"):
        run_sweep(square, {"status": [1]}, output=out)
    with pytest.raises(ValueError, match="grid"):
        run_sweep(square, "alpha", output=out)
    with pytest.raises(ValueError, match="n_jobs"):
        run_sweep(square, GRID, output=out, n_jobs=0)
    with pytest.raises(ValueError, match="scheduler_address"):
        run_sweep(square, GRID, output=out, scheduler_address="tcp://x:1")
    assert not out.exists()
    with pytest.raises(FileNotFoundError):
        read_sweep(out)
    out.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a skattn sweep file"):
        run_sweep(square, GRID, output=out)
    assert out.read_text() == "a,b\n1,2\n"  # untouched


def test_truncated_and_corrupt_lines_are_ignored(tmp_path):
    out = tmp_path / "sweep.csv"
    run_sweep(square, {"alpha": [0.5, 1.0], "lam": [0.0], "seed": [0]}, output=out,
              backend="sequential")
    lines, _ = _data_lines(out)
    good = read_sweep(out)
    # a line with the wrong field count, then a last line cut mid-write (no newline)
    with open(out, "ab") as fh:
        fh.write(b"deadbeef,ok,\n")
        fh.write(lines[0][: len(lines[0]) // 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_sweep(out) == good
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2 and all(w.category is RuntimeWarning for w in caught)
    assert "ignored a truncated last line" in messages[0]
    assert "ignored line 4 (expected 6 fields, got 3)" in messages[1]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_sweep(square, {"alpha": [0.5, 1.0, 2.0], "lam": [0.0], "seed": [0]},
                        output=out, backend="sequential")
    assert len(caught) == 2
    assert (res.n_skipped, res.n_run) == (2, 1)
    data = out.read_bytes()
    assert data.endswith(b"\n")  # the partial line was cut off before appending
    assert data.count(b"\n") == 1 + 2 + 1 + 1  # header, 2 rows, bad line, new row
    with pytest.warns(RuntimeWarning, match="line 4"):
        rows = read_sweep(out)
    assert [r["alpha"] for r in rows] == [0.5, 1.0, 2.0]

    # a header cut by a crash before any row finished: repaired, not rejected
    out2 = tmp_path / "cut.csv"
    out2.write_bytes(b"key,status,err")
    assert read_sweep(out2) == []
    assert run_sweep(square, GRID, output=out2, backend="sequential").n_run == 12
    assert len(read_sweep(out2)) == 12


_CHILD = textwrap.dedent("""
    import sys, time
    from skattn.sweep import run_sweep

    def slow(i, j):
        time.sleep(0.2)
        return {"prod": i * j, "tag": f"{i}-{j}"}

    run_sweep(slow, {"i": list(range(10)), "j": [1, 2, 3]}, output=sys.argv[1],
              backend="sequential")
""")


def test_kill_and_resume(tmp_path):
    out = tmp_path / "killed.csv"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= 1 + 4:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.02)
        else:
            pytest.fail("the sweep subprocess wrote no rows within 60 s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    # every finished row in the file is intact; at most a partial last line
    data = out.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    records = list(csv.reader(complete.decode().splitlines()))[1:]
    assert 4 <= len(records) < 30
    for key, status, error, wall, params, results in records:
        params, results = json.loads(params), json.loads(results)
        assert status == "ok" and error == "" and float(wall) >= 0.19
        assert key == row_key(params)
        assert results == {"prod": params["i"] * params["j"],
                           "tag": f"{params['i']}-{params['j']}"}
    n_done = len(records)

    res = run_sweep(lambda i, j: {"prod": i * j, "tag": f"{i}-{j}"},
                    {"i": list(range(10)), "j": [1, 2, 3]}, output=out, backend="joblib")
    assert (res.n_skipped, res.n_run, res.n_failed) == (n_done, 30 - n_done, 0)
    rows = read_sweep(out)
    assert sorted((r["i"], r["j"]) for r in rows) == [(i, j) for i in range(10) for j in (1, 2, 3)]
    assert all(r["prod"] == r["i"] * r["j"] for r in rows)
    lines, tail = _data_lines(out)
    assert tail == b"" and len(lines) == 30  # each row exactly once in the file


def test_second_writer_is_refused(tmp_path):
    pytest.importorskip("fcntl")
    out = tmp_path / "sweep.csv"

    def nested(alpha, lam, seed):
        with pytest.raises(RuntimeError, match="locked"):
            run_sweep(square, GRID, output=out, backend="sequential")
        return {"x": 1}

    res = run_sweep(nested, [{"alpha": 1.0, "lam": 0.0, "seed": 0}], output=out,
                    backend="sequential")
    assert res.n_failed == 0


def test_progress_bar(tmp_path, capsys):
    run_sweep(square, GRID, output=tmp_path / "s.csv", backend="sequential", verbose=1)
    assert "12/12" in capsys.readouterr().err


def test_parquet_output(tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "sweep.parquet"
    res = run_sweep(fails_on_lam, GRID, output=out, backend="joblib", n_jobs=2)
    assert (res.n_run, res.n_failed) == (12, 3)
    assert len(list(out.glob("*.parquet"))) == 12
    assert not list(out.glob(".*.tmp"))
    res2 = run_sweep(square, GRID, output=out, backend="sequential")
    assert (res2.n_run, res2.n_skipped) == (3, 9)
    rows = read_sweep(out)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    assert _by_params(rows) == _by_params(res2.rows)
    assert type(rows[0]["n"]) is int and type(rows[0]["ok"]) is bool
    # a stale temporary file of a killed writer is ignored, then cleaned up
    (out / ".deadbeef.0.tmp").write_bytes(b"PAR1 partial")
    assert len(read_sweep(out)) == 12
    assert run_sweep(square, GRID, output=out, backend="sequential").n_skipped == 12
    assert not list(out.glob(".*.tmp"))


def test_dask_local_cluster_matches_joblib(tmp_path):
    pytest.importorskip("distributed")
    ref = run_sweep(fails_on_lam, GRID, output=tmp_path / "joblib.csv", backend="joblib",
                    n_jobs=2)
    res = run_sweep(fails_on_lam, GRID, output=tmp_path / "dask.csv", backend="dask",
                    n_jobs=2)
    assert (res.n_run, res.n_failed) == (ref.n_run, ref.n_failed) == (12, 3)

    def strip(rows):
        return {r["key"]: {k: v for k, v in r.items() if k != "wall_time"} for r in rows}

    assert strip(read_sweep(tmp_path / "dask.csv")) == strip(read_sweep(tmp_path / "joblib.csv"))
    assert strip(res.rows) == strip(ref.rows)
    # resume on a running cluster given by its address
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster:
        res2 = run_sweep(square, GRID, output=tmp_path / "dask.csv", backend="dask",
                         scheduler_address=cluster.scheduler_address)
    assert (res2.n_run, res2.n_skipped, res2.n_failed) == (3, 9, 0)
    assert all(r["status"] == "ok" for r in read_sweep(tmp_path / "dask.csv"))


def test_dask_missing_is_a_clear_import_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match="dask"):
        run_sweep(square, GRID, output=tmp_path / "s.csv", backend="dask")
