"""One training run evaluated on two benchmarks after each of 8 epochs (docs/tables.md, "Which
benchmarks tell checkpoints apart"): a linear classifier trained by SGD on scikit-learn's digits, its
predictions on the held-out half stored per epoch as the result set test-<epoch>, with two tasks:
every digit, and the zeros alone (which it gets right from the first epoch)."""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split

import labledger

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.5, random_state=0)
clf = SGDClassifier(loss="log_loss", learning_rate="constant", eta0=0.0002, random_state=0)
classes = np.unique(y)
rng = np.random.default_rng(0)
with labledger.start_run("sgd-slow", config={"eta0": 0.0002, "epochs": 8}) as run:
    for epoch in range(1, 9):
        order = rng.permutation(len(X_train))
        clf.partial_fit(X_train[order], y_train[order], classes=classes)
        pred = clf.predict(X_test)
        rows = [
            {"id": f"d{i}", "task": "digits", "gold": str(g), "pred": str(p)}
            for i, (g, p) in enumerate(zip(y_test, pred))
        ]
        rows += [
            {"id": f"z{i}", "task": "zeros", "gold": str(g), "pred": str(p)}
            for i, (g, p) in enumerate(zip(y_test, pred))
            if g == 0
        ]
        run.log_results(f"test-{epoch}", rows)
        run.log(epoch, accuracy=float((pred == y_test).mean()))
