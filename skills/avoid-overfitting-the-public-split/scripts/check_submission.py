#!/usr/bin/env python3
"""check_submission.py - sanity-check submission.csv before submitting an ML task.

    python3 check_submission.py                                   # defaults below
    python3 check_submission.py --target label                    # also compare with train labels
    python3 check_submission.py --sub submission.csv --test data/test.csv --train data/train.csv \
        --id id --pred prediction --target progression

Errors (exit code 1): missing file/columns, wrong row count, missing/extra/duplicate ids,
NaN or infinite predictions, non-numeric predictions where the train target is numeric.
Warnings (exit 0): constant predictions, labels never seen in train, probabilities outside
[0, 1], regression predictions far outside the train target range, id order differs from test.
"""
import argparse
import sys

import numpy as np
import pandas as pd


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sub", default="submission.csv")
    ap.add_argument("--test", default="data/test.csv")
    ap.add_argument("--train", default="data/train.csv")
    ap.add_argument("--id", default="id")
    ap.add_argument("--pred", default="prediction")
    ap.add_argument("--target", default=None, help="train label column (enables label checks)")
    return ap.parse_args()


def main():
    a = parse_args()
    errors, warns = [], []

    try:
        sub = pd.read_csv(a.sub)
    except Exception as e:
        print(f"ERROR: cannot read {a.sub}: {e}")
        return 1
    test = pd.read_csv(a.test, usecols=[a.id])
    print(f"{a.sub}: {len(sub)} rows, columns {list(sub.columns)}; test has {len(test)} rows")

    for col in (a.id, a.pred):
        if col not in sub.columns:
            errors.append(f"missing column '{col}'")
    extra = [c for c in sub.columns if c not in (a.id, a.pred)]
    if extra:
        warns.append(f"extra columns {extra} (graders usually ignore or reject them)")
    if errors:
        return report(errors, warns)

    check_ids(sub, test, a, errors, warns)
    p = sub[a.pred]
    numeric = check_predictions(p, errors, warns)
    if a.target:
        check_labels(p, numeric, pd.read_csv(a.train, usecols=[a.target])[a.target], errors, warns)
    elif numeric:
        print(f"pred min {p.min():.4g} mean {p.mean():.4g} max {p.max():.4g}")
    return report(errors, warns)


def check_ids(sub, test, a, errors, warns):
    """Row count, duplicate ids, ids missing or unknown, id order."""
    if len(sub) != len(test):
        errors.append(f"row count {len(sub)} != test rows {len(test)}")
    if sub[a.id].duplicated().any():
        errors.append(f"{int(sub[a.id].duplicated().sum())} duplicate ids")
    sid, tid = set(sub[a.id].astype(str)), set(test[a.id].astype(str))
    if sid != tid:
        errors.append(f"id mismatch: {len(tid - sid)} test ids missing, {len(sid - tid)} unknown ids "
                      f"(e.g. missing {sorted(tid - sid)[:3]}, unknown {sorted(sid - tid)[:3]})")
    elif list(sub[a.id].astype(str)) != list(test[a.id].astype(str)):
        warns.append("ids are a permutation of the test ids (fine if the grader joins on id)")


def check_predictions(p, errors, warns):
    """Missing, infinite or constant predictions; returns whether they are numeric."""
    numeric = pd.api.types.is_numeric_dtype(p)
    if p.isna().any():
        errors.append(f"{int(p.isna().sum())} missing predictions")
    if numeric and np.isinf(p.to_numpy(dtype=float)).any():
        errors.append("infinite predictions")
    if p.nunique(dropna=True) <= 1:
        warns.append("all predictions are identical (model collapsed or a bug)")
    return numeric


def check_labels(p, numeric, y, errors, warns):
    """Predictions against the train target `y`: type, unseen labels, probability range, value range."""
    y_numeric = pd.api.types.is_numeric_dtype(y)
    n_classes = y.nunique()
    if y_numeric and not numeric:
        errors.append("predictions are not numeric but the train target is")
    elif n_classes <= 20 and not (numeric and ((p % 1) != 0).any()):
        unseen = set(p.dropna().unique()) - set(y.unique())
        if unseen:
            warns.append(f"predicted labels never seen in train: {sorted(map(str, unseen))[:5]}")
        print("train label shares:", y.value_counts(normalize=True).round(3).to_dict())
        print("pred  label shares:", p.value_counts(normalize=True).round(3).to_dict())
    elif n_classes == 2 and numeric:
        if (p < 0).any() or (p > 1).any():
            warns.append("binary target but predictions outside [0, 1] (expected probabilities?)")
        print(f"pred mean {p.mean():.4f} vs train positive rate {(y == y.max()).mean():.4f}")
    elif y_numeric and numeric:
        lo, hi, span = y.min(), y.max(), y.max() - y.min()
        if p.min() < lo - 0.5 * span or p.max() > hi + 0.5 * span:
            warns.append(f"predictions [{p.min():.4g}, {p.max():.4g}] far outside train target [{lo:.4g}, {hi:.4g}]")
        print(f"pred mean {p.mean():.4g} std {p.std():.4g} | train target mean {y.mean():.4g} std {y.std():.4g}")


def report(errors, warns):
    for w in warns:
        print("WARNING:", w)
    for e in errors:
        print("ERROR:", e)
    print("RESULT:", "FAIL" if errors else "OK")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
