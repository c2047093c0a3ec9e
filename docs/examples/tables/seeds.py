"""Five runs of one setup that differ only by their seed (docs/tables.md, "The noise floor of a setup"):
a linear classifier trained by SGD on scikit-learn's digits, each run's test predictions stored."""

from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split

import labledger

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.5, random_state=0)
for seed in range(5):
    config = {"model": "sgd-logreg", "epochs": 5, "seed": seed}
    clf = SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=seed).fit(X_train, y_train)
    pred = clf.predict(X_test)
    rows = [
        {"id": f"d{i}", "task": "digits", "gold": str(g), "pred": str(p)} for i, (g, p) in enumerate(zip(y_test, pred))
    ]
    with labledger.start_run(f"sgd-seed{seed}", group="sgd", config=config) as run:
        run.log_results("test", rows)
