"""The Python package against the CLI: fit / predict / score / save / load round trips,
checkpoints shared both ways with `slide-train`, the same P@1 as the CLI for the same data
and seed, and bad input raised as exceptions with the CLI's messages."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import slide

ROOT = Path(__file__).resolve().parents[2]
# The shipped xmc.toml's network with a narrower hidden layer, one thread (the CLI runs
# below match it bit for bit), few samples: quick.
SMALL = {"network.layers.0.size": 256}


def slide_train() -> str:
    """The `slide-train` binary of this checkout (`cargo build -p slide-trainer` makes it)."""
    for profile in ("debug", "release"):
        path = ROOT / "target" / profile / "slide-train"
        if path.exists():
            return str(path)
    pytest.skip("no slide-train binary: run `cargo build -p slide-trainer` first")


def dataset(n=1200, features=400, labels=40, seed=0):
    """Rows whose labels own a few prototype features each (as gen-data makes), 1-2 labels
    per row, plus noise features; returns (X, Y as label lists)."""
    rng = np.random.default_rng(seed)
    prototypes = rng.integers(0, features, size=(labels, 8))
    rows, cols, vals, ys = [], [], [], []
    for i in range(n):
        own = rng.choice(labels, size=rng.integers(1, 3), replace=False)
        feats = set(rng.integers(0, features, size=5).tolist())
        for label in own:
            feats.update(prototypes[label][rng.random(8) < 0.7].tolist())
        for f in sorted(feats):
            rows.append(i)
            cols.append(f)
            vals.append(float(rng.uniform(0.5, 1.5)))
        ys.append(sorted(own.tolist()))
    x = sp.csr_matrix((np.array(vals, np.float32), (rows, cols)), shape=(n, features))
    return x, ys


@pytest.fixture(scope="module")
def data():
    x, y = dataset()
    return x[:1000], y[:1000], x[1000:], y[1000:]


@pytest.fixture(scope="module")
def trained(data):
    x, y, xt, yt = data
    model = slide.Classifier(epochs=5, seed=5, threads=1, verbose=False, set=SMALL)
    return model.fit(x, y, xt, yt)


def test_fit_predict_score(data, trained):
    x, y, xt, yt = data
    scores = trained.score(xt, yt)
    # Measured 1.0 (0.995 before the decoupled softmax): each label owns prototype features
    # its rows share.
    assert scores["p@1"] > 0.9, scores
    assert scores["samples"] == 200
    labels, logits = trained.predict(xt, k=5)
    assert labels.shape == (200, 5) and logits.shape == (200, 5)
    assert labels.dtype == np.uint32 and logits.dtype == np.float32
    assert np.all(np.diff(logits, axis=1) <= 0), "scores best first"
    hits = np.mean([labels[i, 0] in yt[i] for i in range(200)])
    assert hits == pytest.approx(scores["p@1"])
    # Dense input gives the same answers as sparse.
    dense_labels, _ = trained.predict(xt.toarray(), k=5)
    assert np.array_equal(dense_labels, labels)
    # A CSR label matrix scores as the lists do.
    y_csr = sp.csr_matrix(
        (np.ones(sum(map(len, yt))), np.concatenate(yt), np.cumsum([0] + [len(r) for r in yt])),
        shape=(200, 40),
    )
    assert trained.score(xt, y_csr) == scores
    assert trained.score(xt, yt, mode="lsh")["p@1"] > 0.5


def label_matrix(rows, labels):
    """Label lists as a CSR matrix of ones."""
    indptr = np.cumsum([0] + [len(r) for r in rows])
    ids = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows])
    return sp.csr_matrix((np.ones(len(ids)), ids, indptr), shape=(len(rows), labels))


def repository_metrics(top, truth, train, a=0.55, b=1.5, k=5):
    """P@k, nDCG@k, PSP@k and PSnDCG@k for k = 1..5 as the Extreme Classification
    Repository's tools (pyxclib's xc_metrics) compute them, with NumPy and SciPy over
    matrices: `top` the ranked label ids (n, k), `truth` and `train` CSR label matrices."""
    n_train, labels = train.shape
    freqs = np.ravel(train.sum(axis=0))
    c = (np.log(n_train) - 1) * (b + 1) ** a
    inv_psp = 1.0 + c * (freqs + b) ** -a
    truth = truth.tocsr()
    rows = np.repeat(np.arange(truth.shape[0]), k)
    flags = np.asarray(truth[rows, top.ravel()]).reshape(-1, k)
    weighted = flags * inv_psp[top]
    # The best possible top k: each row's labels by inverse propensity, padded with zeros.
    best = np.zeros_like(weighted)
    for i in range(truth.shape[0]):
        w = np.sort(inv_psp[truth.indices[truth.indptr[i]:truth.indptr[i + 1]]])[::-1][:k]
        best[i, : len(w)] = w
    ranks = np.arange(1, k + 1)
    discount = 1 / np.log2(ranks + 1)
    positives = np.diff(truth.indptr)
    # The best DCG at each depth j: that of min(|y|, j) labels.
    depth = np.minimum(np.maximum(positives, 1)[:, None], ranks[None, :])
    ideal = np.cumsum(discount)[depth - 1]
    valid = (positives > 0)[:, None]
    precision = np.mean(np.cumsum(flags, axis=1) / ranks, axis=0)
    ndcg = np.mean(np.where(valid, np.cumsum(flags * discount, axis=1) / ideal, 0), axis=0)
    psp = np.mean(np.cumsum(weighted, axis=1), axis=0) / np.mean(np.cumsum(best, axis=1), axis=0)
    psdcg = np.where(valid, np.cumsum(weighted * discount, axis=1) / ideal, 0)
    psbest = np.where(valid, np.cumsum(best * discount, axis=1) / ideal, 0)
    psndcg = np.mean(psdcg, axis=0) / np.mean(psbest, axis=0)
    return {"p": precision, "ndcg": ndcg, "psp": psp, "psndcg": psndcg}


def test_score_matches_the_repositorys_formulas(data, trained):
    """`score` equals the repository's metrics computed with NumPy from `predict`'s top 5
    and the training labels' propensities, to 1e-6; `last_eval` holds the validation
    data's."""
    x, y, xt, yt = data
    # The periodic evaluation sums the samples in another order: equal to rounding.
    scored = trained.score(xt, yt)
    assert trained.last_eval == {k: pytest.approx(v, abs=1e-12) for k, v in scored.items()
                                 if k != "samples"}
    # The model ranks these labels almost perfectly: each row gets one more label, drawn
    # at random, so that every metric is well away from 1.
    rng = np.random.default_rng(11)
    truth = [sorted(set(row) | {int(rng.integers(40))}) for row in yt]
    labels, _ = trained.predict(xt, k=5)
    want = repository_metrics(labels.astype(np.int64), label_matrix(truth, 40), label_matrix(y, 40))
    got = trained.score(xt, truth)
    for name, values in want.items():
        for k in (1, 3, 5):
            assert got[f"{name}@{k}"] == pytest.approx(values[k - 1], abs=1e-6), (name, k)
    assert all(0.3 < got[f"{name}@5"] < 0.95 for name in want), got


def test_predict_answers_100_labels_and_follows_the_configs_eval_mode():
    """`predict(X, k=100)` answers 100 distinct labels a row, whose first 5 are `k=5`'s; k
    outside 1..labels raises. The config's `eval_mode` is what `predict` and `score` use
    unless `mode` is given."""
    x, y = dataset(n=700, labels=120, seed=3)
    model = slide.Classifier(epochs=2, seed=5, threads=1, verbose=False, set=SMALL)
    model.fit(x[:600], y[:600])
    assert model.last_eval is None
    xt = x[600:]
    five, _ = model.predict(xt, k=5)
    hundred, scores = model.predict(xt, k=100)
    assert hundred.shape == (100, 100) and scores.shape == (100, 100)
    assert np.array_equal(hundred[:, :5], five)
    assert all(len(set(row.tolist())) == 100 for row in hundred)
    # xmc.toml's wide head re-ranks each row's first 16 and up to 16 rare-feature labels
    # (their scores: logit + 3 x wide score); the network's next best follow by logit.
    assert np.all(np.diff(scores[:, :5], axis=1) <= 0)
    assert np.all(np.diff(scores[:, 32:], axis=1) <= 0)
    for k in (0, 121):
        with pytest.raises(ValueError, match="k must be"):
            model.predict(xt, k=k)
    # LSH mode with a pool of 8 labels and one table pick per row scores a few labels only
    # (the rest of a top 100 is padding); exact scores all 120.
    lsh = slide.Classifier(epochs=2, seed=5, threads=1, verbose=False, eval_mode="lsh",
                           eval_pool=8, eval_picks=1, set=SMALL)
    lsh.fit(x[:600], y[:600])
    by_config = lsh.predict(xt, k=100)[0]
    assert np.array_equal(by_config, lsh.predict(xt, k=100, mode="lsh")[0])
    assert np.sum(by_config == 2**32 - 1) > 1000
    assert np.sum(lsh.predict(xt, k=100, mode="exact")[0] == 2**32 - 1) == 0
    assert lsh.score(xt, y[600:]) == lsh.score(xt, y[600:], mode="lsh")
    assert lsh.score(xt, y[600:]) != lsh.score(xt, y[600:], mode="exact")


def test_fit_without_validation_reports_no_test_figures(capfd):
    """Without validation data there is nothing to evaluate on: no `P@1 0.0000` lines (a
    model that seems to score nothing), and no last evaluation."""
    x, y = dataset(n=300, labels=20, seed=4)
    model = slide.Classifier(epochs=2, seed=5, threads=1, verbose=True, set=SMALL)
    model.fit(x, y)
    printed = capfd.readouterr()
    assert "P@1" not in printed.out + printed.err, printed.out
    assert model.last_eval is None


def test_save_and_load_round_trip(tmp_path, data, trained):
    x, y, xt, yt = data
    path = trained.save(tmp_path / "model")
    assert Path(path).exists() and (tmp_path / "model" / "config.toml").exists()
    back = slide.load(tmp_path / "model", threads=1)
    assert back.n_features == 400 and back.n_labels == 40
    a, sa = trained.predict(xt)
    b, sb = back.predict(xt)
    assert np.array_equal(a, b) and np.array_equal(sa, sb)
    # The checkpoint file itself loads too; a loaded model weighs PSP@k by the training
    # labels it is given (it has not seen them).
    loaded = slide.load(path)
    assert "psp@5" not in loaded.score(xt, yt)
    assert loaded.score(xt, yt, Y_train=y) == trained.score(xt, yt)


def test_read_and_write_xmc(tmp_path, data):
    x, y, _, _ = data
    path = tmp_path / "train.txt"
    slide.write_xmc(path, x, y)
    x2, y2 = slide.read_xmc(path)
    assert x2.shape == x.shape and y2.shape == (1000, 40)
    assert abs(x2 - x).max() < 1e-6
    assert [sorted(y2.indices[y2.indptr[i] : y2.indptr[i + 1]].tolist()) for i in range(1000)] == y


def cli_files(tmp_path, data):
    x, y, xt, yt = data
    slide.write_xmc(tmp_path / "train.txt", x, y)
    slide.write_xmc(tmp_path / "test.txt", xt, yt)
    return [
        "--set", f'data.train="{tmp_path / "train.txt"}"',
        "--set", f'data.test="{tmp_path / "test.txt"}"',
    ]


def test_the_cli_and_python_train_the_same_model(tmp_path, data):
    """Same data, config and seed, one thread: the CLI's final P@1 is Python's, and the
    CLI's checkpoint loads in Python and predicts what Python's model predicts."""
    x, y, xt, yt = data
    files = cli_files(tmp_path, data)
    run = subprocess.run(
        [slide_train(), "--config", str(ROOT / "configs/xmc.toml"), "--threads", "1",
         "--out", str(tmp_path / "run"), "--set", "train.epochs=2", "--set", "train.seed=5",
         "--set", "network.layers.0.size=256", *files],
        capture_output=True, text=True, check=True,
    )
    cli_p1 = float(re.search(r"P@1 ([0-9.]+)", run.stdout.splitlines()[-1]).group(1))
    model = slide.Classifier(epochs=2, seed=5, threads=1, verbose=False, set=SMALL)
    model.fit(*slide.read_xmc(tmp_path / "train.txt"))
    xt_file, yt_file = slide.read_xmc(tmp_path / "test.txt")
    assert model.score(xt_file, yt_file)["p@1"] == pytest.approx(cli_p1, abs=5e-5)
    from_cli = slide.load(tmp_path / "run" / "checkpoints", config=ROOT / "configs/xmc.toml",
                          set={"data.train": str(tmp_path / "train.txt"), "train.seed": 5,
                               **SMALL})
    assert np.array_equal(from_cli.predict(xt_file)[0], model.predict(xt_file)[0])


def test_a_python_model_evaluates_in_the_cli(tmp_path, data, trained):
    x, y, xt, yt = data
    files = cli_files(tmp_path, data)
    trained.save(tmp_path / "model")
    run = subprocess.run(
        [slide_train(), "eval", "--config", str(tmp_path / "model" / "config.toml"),
         "--checkpoint", str(tmp_path / "model"), *files],
        capture_output=True, text=True, check=True,
    )
    p1 = float(re.search(r"P@1 ([0-9.]+)", run.stdout).group(1))
    assert p1 == pytest.approx(trained.score(xt, yt)["p@1"], abs=5e-5)


def nan_at_row_3(x, y):
    x = x.copy()
    x.data[x.indptr[3]] = np.nan
    return x, y


@pytest.mark.parametrize(
    "change, message",
    [
        (nan_at_row_3, "X row 3: value NaN of feature"),
        (lambda x, y: (x[:10], y), "X has 10 rows but Y has 1000"),
        (lambda x, y: (x, [[-1]] + y[1:]), "Y: label -1 is negative"),
    ],
)
def test_bad_arrays_raise_value_errors(tmp_path, data, change, message):
    x, y, _, _ = data
    bad_x, bad_y = change(x, y)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(message)):
        slide.Classifier(verbose=False, out=out, set=SMALL).fit(bad_x, bad_y)
    # Refused before any work: nothing written.
    assert not out.exists() or not any(out.iterdir())


def test_bad_labels_keys_and_configs_raise(tmp_path, data, trained):
    x, y, xt, yt = data
    with pytest.raises(ValueError, match="Y row 0: label 99 is out of range: labels are below 40"):
        trained.score(xt, [[99]] + yt[1:])
    with pytest.raises(ValueError, match="Y has 100 labels but the model has 40"):
        trained.score(xt, sp.csr_matrix((200, 100), dtype=np.float32))
    with pytest.raises(ValueError, match=re.escape("train: unknown field `lrr`")):
        slide.Classifier(lrr=0.1, verbose=False).fit(x, y)
    with pytest.raises(ValueError, match="train.lr: must be positive"):
        slide.Classifier(lr=-1.0, verbose=False).fit(x, y)
    with pytest.raises(ValueError, match="no such file, and not a shipped config"):
        slide.Classifier("nope.toml").fit(x, y)
    with pytest.raises(ValueError, match="X has 7 features but the model was trained on 400"):
        trained.predict(sp.csr_matrix((3, 7), dtype=np.float32))
    with pytest.raises(ValueError, match="not trained yet"):
        slide.Classifier().predict(xt)
    with pytest.raises(ValueError, match="k must be between 1 and the model's 40 labels"):
        trained.predict(xt, k=41)
    # A failed save leaves nothing under the final names.
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the folder would go")
    with pytest.raises(ValueError):
        trained.save(blocker)
    assert blocker.read_text() == "a file where the folder would go"
    with pytest.raises(ValueError, match="holds no checkpoint|config.toml"):
        slide.load(tmp_path)


def test_a_malformed_xmc_file_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("2 300 50\n0 1:1\n1 999:1\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}:3: feature 999 is out of range")):
        slide.read_xmc(path)


def test_ctrl_c_stops_fit_between_steps_and_keeps_the_model(tmp_path):
    """SIGINT during `fit` (the GIL released, Rust training): the step in progress ends,
    KeyboardInterrupt is raised, and the model trained so far is kept and predicts."""
    script = tmp_path / "interrupted.py"
    script.write_text(
        "import os, signal, sys, threading\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_slide import dataset\n"
        "import slide\n"
        "x, y = dataset(n=4000)\n"
        "model = slide.Classifier(epochs=1000, threads=1, verbose=False)\n"
        "threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
        "try:\n"
        "    model.fit(x, y)\n"
        "    print('not interrupted')\n"
        "except KeyboardInterrupt as stop:\n"
        "    labels, _ = model.predict(x[:5], k=1)\n"
        "    print('interrupted', model._model.steps, labels.shape, stop)\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    words = run.stdout.split()
    assert words[0] == "interrupted", run.stdout
    assert int(words[1]) > 0 and "(5, 1)" in run.stdout, run.stdout
    assert "interrupted at step" in run.stdout, run.stdout


def test_partial_fit_grows_the_labels_and_predicts_a_new_one(tmp_path):
    """A model trained on labels 0-31 of 40, continued with partial_fit on the rows that
    have a label 32-39 (and a share of the old rows), predicts those labels, which it had no
    output for; a saved and loaded model continues the same way; shapes that cannot continue
    are refused."""
    x, y = dataset(n=1600, labels=40, seed=3)
    old = [i for i in range(1400) if all(label < 32 for label in y[i])]
    new = [i for i in range(1400) if any(label >= 32 for label in y[i])]
    test = [i for i in range(1400, 1600) if any(label >= 32 for label in y[i])]
    model = slide.Classifier(epochs=5, seed=5, threads=1, verbose=False, set=SMALL)
    model.fit(x[old], [y[i] for i in old])
    assert model.n_labels == 32
    before = model.predict(x[test], k=1)[0]
    assert before.max() < 32, "a model of 32 labels names no other"
    rows = new + old[::3]
    model.partial_fit(x[rows], label_matrix([y[i] for i in rows], 40), epochs=5)
    assert model.n_labels == 40
    labels = model.predict(x[test], k=1)[0][:, 0]
    right = np.mean([labels[j] in y[i] for j, i in enumerate(test)])
    new_named = np.mean(labels >= 32)
    print(f"partial_fit: P@1 {right:.3f} on the rows with a new label, {new_named:.3f} name one")
    # Measured: P@1 1.000 on the test rows with a new label, 0.70 of them answered with one.
    assert right > 0.8 and new_named > 0.5, (right, new_named)
    # Saved and loaded, a model continues too (its config travels with it).
    model.save(tmp_path / "model")
    loaded = slide.load(tmp_path / "model", threads=1)
    loaded.verbose = False
    loaded.partial_fit(x[rows], [y[i] for i in rows], epochs=1)
    assert loaded.n_labels == 40
    with pytest.raises(ValueError, match="cannot add input features"):
        loaded.partial_fit(sp.hstack([x[rows], x[rows]]).tocsr(), [y[i] for i in rows])
    with pytest.raises(ValueError, match="labels"):
        loaded.partial_fit(x[rows], label_matrix([[0] for _ in rows], 20))
