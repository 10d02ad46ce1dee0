"""Resumable sweeps (skattn.sweep): backends, resume, kill-and-resume, truncated rows."""

import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from skattn.sweep import SweepResult, export_sweep, read_sweep, row_key, run_sweep

GRID = {"alpha": [0.5, 1.0, 2.0], "lam": [0.0, 0.1], "seed": [0, 1]}  # 12 rows


def square(alpha, lam, seed):
    return {"err": alpha * (1 + lam) + seed, "n": int(10 * alpha), "ok": seed == 0,
            "np": np.float32(alpha)}


def fails_on_lam(alpha, lam, seed):
    if lam == 0.1 and seed == 1:
        raise RuntimeError(f"diverged at alpha={alpha}\nsecond line")
    return square(alpha, lam, seed)


def _stored(path):
    """``{key: attempts}`` of the rows of a SQLite sweep store, read with sqlite3 itself."""
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, attempts FROM sweep_rows"))


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
    out = tmp_path / "sub" / "sweep.sqlite"
    res = run_sweep(square, GRID, output=out, backend=backend, n_jobs=n_jobs)
    assert isinstance(res, SweepResult) and res.store == res.output == out
    assert (res.n_run, res.n_skipped, res.n_failed, res.n_ok) == (12, 0, 0, 12)
    stored = _stored(out)
    assert len(stored) == 12 and set(stored.values()) == {1}

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
    assert _stored(out) == stored


@pytest.mark.parametrize("backend", ["sequential", "joblib"])
def test_failed_rows_recorded_and_retried(tmp_path, backend):
    out = tmp_path / "sweep.db"
    res = run_sweep(fails_on_lam, GRID, output=out, backend=backend, n_jobs=2)
    assert (res.n_run, res.n_failed) == (12, 3)
    failed = [r for r in read_sweep(out) if r["status"] == "error"]
    assert len(failed) == 3
    for r in failed:
        assert r["error"].startswith("RuntimeError: diverged")
        assert "\\nsecond line" in r["error"]  # one physical line per record
        assert "err" not in r
    assert len(_stored(out)) == 12

    res2 = run_sweep(square, GRID, output=out, backend=backend, n_jobs=2)
    assert (res2.n_run, res2.n_skipped, res2.n_failed) == (3, 9, 0)
    rows = read_sweep(out)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    attempts = sorted(_stored(out).values())
    assert attempts == [1] * 9 + [2] * 3  # one row per key; the retries counted


def test_bad_return_values_are_error_rows(tmp_path):
    out = tmp_path / "sweep.sqlite"
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
    out = tmp_path / "sweep.sqlite"
    run_sweep(square, GRID, output=out, backend="sequential")
    res = run_sweep(lambda alpha, lam, seed: {"err": -1.0}, GRID, output=out,
                    backend="sequential", resume=False)
    assert (res.n_run, res.n_skipped) == (12, 0)
    assert set(_stored(out).values()) == {2}  # every row rerun, each stored once
    rows = read_sweep(out)
    assert len(rows) == 12 and all(r["err"] == -1.0 and "n" not in r for r in rows)


def test_grid_forms(tmp_path):
    out = tmp_path / "sweep.sqlite"
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
    assert not (tmp_path / "s.sqlite").exists()
    # a store that is not a SQLite file, or a SQLite database of something else
    (tmp_path / "t.sqlite").write_text("hello")
    for call in (lambda: run_sweep(square, GRID, output=tmp_path / "t.sqlite"),
                 lambda: read_sweep(tmp_path / "t.sqlite")):
        with pytest.raises(ValueError, match="not a SQLite sweep store"):
            call()
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(ValueError, match="not a skattn sweep store"):
        run_sweep(square, GRID, output=tmp_path / "other.db")
    with pytest.raises(ValueError, match="path must end in .csv or .parquet"):
        export_sweep(tmp_path / "other.db", tmp_path / "x.sqlite")


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

    # as a CSV of an earlier version (no store next to it): run_sweep imports the good
    # rows into a new store, then rewrites the CSV from it
    for file in tmp_path.glob("sweep.sqlite*"):
        file.unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_sweep(square, {"alpha": [0.5, 1.0, 2.0], "lam": [0.0], "seed": [0]},
                        output=out, backend="sequential")
    assert sorted(w.category.__name__ for w in caught) == [
        "RuntimeWarning", "RuntimeWarning", "UserWarning"]
    assert any("imported 2 rows" in str(w.message) for w in caught)
    assert (res.n_skipped, res.n_run) == (2, 1) and res.store == tmp_path / "sweep.sqlite"
    lines, tail = _data_lines(out)
    assert len(lines) == 3 and tail == b""  # a clean export: the bad lines are gone
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = read_sweep(out)
    assert [r["alpha"] for r in rows] == [0.5, 1.0, 2.0]
    assert read_sweep(res.store) == rows

    # a header cut by a crash before any row finished: repaired, not rejected
    out2 = tmp_path / "cut.csv"
    out2.write_bytes(b"key,status,err")
    assert read_sweep(out2) == []
    assert run_sweep(square, GRID, output=out2, backend="sequential").n_run == 12
    assert len(read_sweep(out2)) == 12


BIG = 30 * 2 ** 20  # a 30 MB result string (the csv module stops at 131072 characters)

_CHILD = textwrap.dedent("""
    import sys, time
    from skattn.sweep import run_sweep

    def slow(i, j):
        time.sleep(0.2)
        return {"prod": i * j, "tag": f"{i}-{j}", "big": "x" * (BIG if i == 1 else 1)}

    run_sweep(slow, {"i": list(range(10)), "j": [1, 2, 3]}, output=sys.argv[1],
              backend="sequential")
""").replace("BIG", str(BIG))

_READER = textwrap.dedent("""
    import json, os, sys
    from skattn.sweep import read_sweep

    out, stop, report = sys.argv[1:]
    counts, errors = [], []
    while not os.path.exists(stop):
        try:
            rows = read_sweep(out) if os.path.exists(out) else []
        except Exception as exc:  # any failure to read is a failed test
            errors.append(repr(exc))
            continue
        counts.append(len(rows))
        for r in rows:
            if r["status"] != "ok" or r["prod"] != r["i"] * r["j"] or (
                    len(r["big"]) != (BIG if r["i"] == 1 else 1)):
                errors.append(f"bad row {r['key']}")
    json.dump({"counts": counts, "errors": errors}, open(report, "w"))
""").replace("BIG", str(BIG))


def _stored_rows(out):
    with sqlite3.connect(out) as conn:
        return conn.execute("SELECT key, status, error, wall_time, params, results, attempts "
                            "FROM sweep_rows").fetchall()


def test_kill_and_resume(tmp_path):
    """SIGKILL while two other processes read: finished rows all kept, a resume runs only
    the others, and every read saw a consistent prefix of the sweep."""
    out = tmp_path / "killed.sqlite"
    stop = tmp_path / "stop"
    readers = [subprocess.Popen([sys.executable, "-c", _READER, str(out), str(stop),
                                 str(tmp_path / f"reader{k}.json")],
                                stderr=subprocess.PIPE) for k in range(2)]
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # past the 30 MB rows (i = 1), then kill
            if out.exists() and len(read_sweep(out)) >= 7:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
        else:
            pytest.fail("the sweep subprocess wrote too few rows within 120 s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        time.sleep(0.5)  # the readers keep reading the store left by the killed writer
        stop.touch()
        for reader in readers:
            assert reader.wait(timeout=60) == 0, reader.stderr.read().decode()
    finally:
        stop.touch()
        for p in (proc, *readers):
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    for k in range(2):  # the readers never failed, and never saw a row vanish
        report = json.loads((tmp_path / f"reader{k}.json").read_text())
        assert report["errors"] == []
        assert len(report["counts"]) >= 2 and report["counts"] == sorted(report["counts"])

    records = _stored_rows(out)
    assert 7 <= len(records) < 30
    for key, status, error, wall, params, results, attempts in records:
        params, results = json.loads(params), json.loads(results)
        assert status == "ok" and error is None and wall >= 0.19 and attempts == 1
        assert key == row_key(params)
        assert results["prod"] == params["i"] * params["j"]
        assert len(results["big"]) == (BIG if params["i"] == 1 else 1)
    done = {key for key, *_ in records}

    ran = []

    def resume(i, j):
        ran.append(row_key({"i": i, "j": j}))
        return {"prod": i * j, "tag": f"{i}-{j}", "big": "x" * (BIG if i == 1 else 1)}

    res = run_sweep(resume, {"i": list(range(10)), "j": [1, 2, 3]}, output=out,
                    backend="sequential")
    assert (res.n_skipped, res.n_run, res.n_failed) == (len(done), 30 - len(done), 0)
    assert len(ran) == 30 - len(done) and not done & set(ran)  # only the unfinished rows
    rows = read_sweep(out)
    assert sorted((r["i"], r["j"]) for r in rows) == [(i, j) for i in range(10) for j in (1, 2, 3)]
    assert all(r["prod"] == r["i"] * r["j"] for r in rows)
    assert len(_stored_rows(out)) == 30  # each row exactly once


def test_long_fields_are_stored_once(tmp_path):
    # the example: a 20000-float parameter (> csv's 131072-character field limit)
    grid = {"spec": [[0.001 * i for i in range(20000)]]}
    for output in ("p.sqlite", "p.csv"):
        calls = []

        def func(spec):
            calls.append(1)
            return {"n": len(spec), "big": "y" * BIG}

        for _ in range(3):
            res = run_sweep(func, grid, output=tmp_path / output, backend="sequential")
            rows = read_sweep(tmp_path / output)
            assert len(rows) == 1 and rows[0]["n"] == 20000 and len(rows[0]["big"]) == BIG
            assert rows[0]["spec"] == grid["spec"][0]
        assert len(calls) == 1 if output == "p.sqlite" else not calls  # same store p.sqlite
        assert res.n_skipped == 1
    assert len(_stored(tmp_path / "p.sqlite")) == 1


def test_legacy_csv_is_migrated_and_exported(tmp_path):
    legacy = tmp_path / "old.csv"
    rec = ["", "ok", "", "0.5", json.dumps({"a": 1}), json.dumps({"b": 2})]
    rec[0] = row_key({"a": 1})
    legacy.write_text("key,status,error,wall_time,params,results\n"
                      + ",".join(csv_quote(f) for f in rec) + "\n")
    with pytest.warns(UserWarning, match=r"imported 1 rows .*old\.sqlite"):
        res = run_sweep(lambda a: {"b": 2 * a}, {"a": [1, 2]}, output=legacy,
                        backend="sequential")
    assert (res.n_skipped, res.n_run) == (1, 1) and res.store == tmp_path / "old.sqlite"
    assert [r["b"] for r in read_sweep(legacy)] == [2, 4]
    assert read_sweep(legacy) == read_sweep(res.store)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing new to import: no warning
        assert run_sweep(lambda a: {"b": 0}, {"a": [1, 2]}, output=legacy).n_run == 0
    assert export_sweep(res.store, tmp_path / "copy.csv") == 2
    assert read_sweep(tmp_path / "copy.csv") == read_sweep(res.store)


def csv_quote(field):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([field])
    return buf.getvalue()


def test_second_writer_is_refused(tmp_path):
    pytest.importorskip("fcntl")
    out = tmp_path / "sweep.sqlite"

    def nested(alpha, lam, seed):
        with pytest.raises(RuntimeError, match=r"sweep\.sqlite.* locked"):
            run_sweep(square, GRID, output=out, backend="sequential")
        # a reader is welcome meanwhile
        assert [r["x"] for r in read_sweep(out)] == [0]
        return {"x": 1}

    run_sweep(lambda alpha, lam, seed: {"x": 0}, [{"alpha": 0.0, "lam": 0.0, "seed": 0}],
              output=out, backend="sequential")
    res = run_sweep(nested, [{"alpha": 1.0, "lam": 0.0, "seed": 0}], output=out,
                    backend="sequential")
    assert res.n_failed == 0


def test_progress_bar(tmp_path, capsys):
    run_sweep(square, GRID, output=tmp_path / "s.sqlite", backend="sequential", verbose=1)
    assert "12/12" in capsys.readouterr().err


def test_parquet_output(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = tmp_path / "sweep.parquet"
    res = run_sweep(fails_on_lam, GRID, output=out, backend="joblib", n_jobs=2)
    assert (res.n_run, res.n_failed) == (12, 3) and res.store == tmp_path / "sweep.sqlite"
    assert [p.name for p in out.iterdir()] == ["sweep.parquet"]  # no temporary files left
    assert pq.read_table(out).num_rows == 12  # a plain Parquet dataset for other tools
    res2 = run_sweep(square, GRID, output=out, backend="sequential")
    assert (res2.n_run, res2.n_skipped) == (3, 9)
    rows = read_sweep(out)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    assert _by_params(rows) == _by_params(res2.rows) == _by_params(read_sweep(res.store))
    assert type(rows[0]["n"]) is int and type(rows[0]["ok"]) is bool

    # a directory of one-row files written by earlier versions is migrated
    legacy = tmp_path / "legacy.parquet"
    legacy.mkdir()
    for a in (1, 2):
        params = {"a": a}
        table = pa.table({"key": [row_key(params)], "status": ["ok"], "error": [None],
                          "wall_time": [0.1], "params": [json.dumps(params)],
                          "results": [json.dumps({"b": 10 * a})]})
        pq.write_table(table, legacy / f"{row_key(params)}.parquet")
    (legacy / ".deadbeef.0.tmp").write_bytes(b"PAR1 partial")  # a killed writer's leftover
    assert [r["b"] for r in read_sweep(legacy)] == [10, 20]
    with pytest.warns(UserWarning, match="imported 2 rows"):
        res3 = run_sweep(lambda a: {"b": 10 * a}, {"a": [1, 2, 3]}, output=legacy,
                         backend="sequential")
    assert (res3.n_skipped, res3.n_run) == (2, 1)
    assert sorted(r["b"] for r in read_sweep(legacy)) == [10, 20, 30]
    assert sorted(r["b"] for r in read_sweep(res3.store)) == [10, 20, 30]


def test_dask_local_cluster_matches_joblib(tmp_path):
    pytest.importorskip("distributed")
    ref = run_sweep(fails_on_lam, GRID, output=tmp_path / "joblib.sqlite", backend="joblib",
                    n_jobs=2)
    res = run_sweep(fails_on_lam, GRID, output=tmp_path / "dask.sqlite", backend="dask",
                    n_jobs=2)
    assert (res.n_run, res.n_failed) == (ref.n_run, ref.n_failed) == (12, 3)

    def strip(rows):
        return {r["key"]: {k: v for k, v in r.items() if k != "wall_time"} for r in rows}

    assert strip(read_sweep(tmp_path / "dask.sqlite")) == strip(read_sweep(tmp_path / "joblib.sqlite"))
    assert strip(res.rows) == strip(ref.rows)
    # resume on a running cluster given by its address
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster:
        res2 = run_sweep(square, GRID, output=tmp_path / "dask.sqlite", backend="dask",
                         scheduler_address=cluster.scheduler_address)
    assert (res2.n_run, res2.n_skipped, res2.n_failed) == (3, 9, 0)
    assert all(r["status"] == "ok" for r in read_sweep(tmp_path / "dask.sqlite"))


def test_dask_missing_is_a_clear_import_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match="dask"):
        run_sweep(square, GRID, output=tmp_path / "s.sqlite", backend="dask")
