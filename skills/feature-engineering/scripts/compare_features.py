#!/usr/bin/env python3
"""compare_features.py - does a feature change help? Cross-validated A/B test on train only.

Copy to the workspace, edit `features_a` (current features) and `features_b` (candidate),
then run for example:
    python3 compare_features.py --target progression --metric rmse
    python3 compare_features.py --target label --metric roc_auc --model linear --repeats 3

Both feature functions receive a copy of the training frame WITHOUT the target column and
must return a numeric DataFrame. They must not look at the target (no leakage); anything
fitted on data (scalers, encoders, target encodings) belongs inside the model pipeline or
must be fitted per fold. Both sets are scored on the SAME folds, so the per-fold difference
is a paired comparison: trust a gain only if it is positive in most folds and larger than
about one standard deviation of the differences.
"""
import argparse
import time

import numpy as np
import pandas as pd
from sklearn import metrics
from sklearn.model_selection import KFold, StratifiedKFold


def features_a(df):
    """Baseline: numeric columns as they are."""
    return df.select_dtypes("number").drop(columns=["id"], errors="ignore")


def features_b(df):
    """Candidate: baseline plus new columns. EDIT ME."""
    out = features_a(df).copy()
    num = out.columns[:2]
    if len(num) == 2:
        out[f"{num[0]}_x_{num[1]}"] = out[num[0]] * out[num[1]]    # example interaction
    return out


HIGHER_IS_BETTER = {"accuracy", "roc_auc", "r2", "f1"}
NEEDS_PROBA = {"roc_auc", "logloss"}


def score(metric, y, pred):
    if metric == "rmse":
        return float(np.sqrt(metrics.mean_squared_error(y, pred)))
    if metric == "mae":
        return float(metrics.mean_absolute_error(y, pred))
    if metric == "r2":
        return float(metrics.r2_score(y, pred))
    if metric == "accuracy":
        return float(metrics.accuracy_score(y, pred))
    if metric == "f1":
        return float(metrics.f1_score(y, pred, average="binary" if len(np.unique(y)) == 2 else "macro"))
    if metric == "roc_auc":
        return float(metrics.roc_auc_score(y, pred) if pred.ndim == 1 else
                     metrics.roc_auc_score(y, pred, multi_class="ovr"))
    if metric == "logloss":
        return float(metrics.log_loss(y, pred))
    raise SystemExit(f"unknown metric {metric}")


def make_model(kind, classification):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    if kind == "hgb":
        return (HistGradientBoostingClassifier(random_state=0) if classification
                else HistGradientBoostingRegressor(random_state=0))
    lin = LogisticRegression(max_iter=2000) if classification else Ridge(alpha=1.0)
    return make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), lin)


def cv_scores(X, y, args, classification):
    out = []
    for rep in range(args.repeats):
        splitter = (StratifiedKFold if classification else KFold)(
            n_splits=args.folds, shuffle=True, random_state=rep)
        for tr, va in splitter.split(X, y):
            model = make_model(args.model, classification)
            model.fit(X.iloc[tr], y.iloc[tr])
            if args.metric in NEEDS_PROBA:
                p = model.predict_proba(X.iloc[va])
                p = p[:, 1] if p.shape[1] == 2 and args.metric == "roc_auc" else p
            else:
                p = model.predict(X.iloc[va])
            out.append(score(args.metric, y.iloc[va], p))
    return np.array(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default="data/train.csv")
    ap.add_argument("--target", required=True)
    ap.add_argument("--metric", required=True, choices=["rmse", "mae", "r2", "accuracy", "f1", "roc_auc", "logloss"])
    ap.add_argument("--model", default="hgb", choices=["hgb", "linear"])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    df = pd.read_csv(args.train)
    y = df[args.target]
    X_raw = df.drop(columns=[args.target])
    classification = args.metric in {"accuracy", "f1", "roc_auc", "logloss"}
    t0 = time.time()
    a = cv_scores(features_a(X_raw.copy()), y, args, classification)
    b = cv_scores(features_b(X_raw.copy()), y, args, classification)
    sign = 1 if args.metric in HIGHER_IS_BETTER else -1
    d = sign * (b - a)                       # > 0 means B is better
    print(f"metric={args.metric} ({'higher' if sign > 0 else 'lower'} is better), "
          f"{args.folds} folds x {args.repeats} repeats, {time.time() - t0:.1f}s")
    print(f"A (baseline):  {a.mean():.5f} +- {a.std():.5f}")
    print(f"B (candidate): {b.mean():.5f} +- {b.std():.5f}")
    print(f"B better in {int((d > 0).sum())}/{len(d)} folds; mean gain {d.mean():+.5f} "
          f"(std of gain {d.std():.5f})")
    verdict = "KEEP B" if d.mean() > d.std() / 2 and (d > 0).mean() >= 0.7 else "no clear gain - keep A"
    print("verdict:", verdict)


if __name__ == "__main__":
    main()
