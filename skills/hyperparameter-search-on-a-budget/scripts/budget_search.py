#!/usr/bin/env python3
"""budget_search.py - time-boxed random search (coarse, then fine around the best) with CV.

Copy to the workspace, adapt `load_xy` to build the same features as train.py, then e.g.:
    python3 budget_search.py --target progression --metric rmse --budget 240
    python3 budget_search.py --target label --metric roc_auc --model rf --budget 120 --folds 3

Every trial is appended to a JSON-lines log (default search_log.jsonl) as soon as it ends,
so a run killed by the command timeout loses at most one trial. Re-running with the same
log resumes: earlier trials count towards "best" and are shown in the summary.
Trial 0 is always the library defaults, so you can see whether tuning helps at all.
The search stops before a new trial would overrun --budget (estimated from trial times).
"""
import argparse
import json
import math
import os
import random
import time

import numpy as np
import pandas as pd
from sklearn import metrics
from sklearn.model_selection import KFold, StratifiedKFold

HIGHER_IS_BETTER = {"accuracy", "roc_auc", "r2", "f1"}
CLASSIFICATION = {"accuracy", "f1", "roc_auc", "logloss"}


def load_xy(path, target):
    """EDIT ME to mirror train.py's features. Default: numeric columns + string columns as codes."""
    df = pd.read_csv(path)
    y = df[target]
    X = df.drop(columns=[target, "id"], errors="ignore")
    for c in X.columns:
        if X[c].dtype == object:
            X[c] = X[c].astype("category").cat.codes
    return X, y


# ---- search spaces: name -> (kind, low, high) ; kinds: log, float, int, choice ----
SPACES = {
    "hgb": {"learning_rate": ("log", 0.01, 0.3), "max_iter": ("int", 50, 800),
            "max_leaf_nodes": ("int", 4, 96), "min_samples_leaf": ("int", 3, 80),
            "l2_regularization": ("log", 1e-4, 10.0), "max_bins": ("choice", [63, 127, 255])},
    "rf": {"n_estimators": ("int", 100, 600), "max_depth": ("choice", [None, 4, 8, 12, 20]),
           "min_samples_leaf": ("int", 1, 20), "max_features": ("choice", ["sqrt", 0.3, 0.5, 0.8, 1.0])},
    "linear": {"C": ("log", 1e-3, 1e3)},      # Ridge alpha = 1/C for regression
}


def make_model(kind, params, classification, seed):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    if kind == "hgb":
        cls = HistGradientBoostingClassifier if classification else HistGradientBoostingRegressor
        return cls(random_state=seed, **params)
    if kind == "rf":
        cls = RandomForestClassifier if classification else RandomForestRegressor
        return make_pipeline(SimpleImputer(strategy="median"), cls(random_state=seed, n_jobs=-1, **params))
    c = params.get("C", 1.0)
    lin = LogisticRegression(C=c, max_iter=3000) if classification else Ridge(alpha=1.0 / c)
    return make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), lin)


def score(metric, y, model, X):
    if metric in ("roc_auc", "logloss"):
        p = model.predict_proba(X)
        if metric == "logloss":
            return metrics.log_loss(y, p, labels=model.classes_)
        return metrics.roc_auc_score(y, p[:, 1]) if p.shape[1] == 2 else metrics.roc_auc_score(y, p, multi_class="ovr")
    p = model.predict(X)
    if metric == "rmse":
        return math.sqrt(metrics.mean_squared_error(y, p))
    if metric == "mae":
        return metrics.mean_absolute_error(y, p)
    if metric == "r2":
        return metrics.r2_score(y, p)
    if metric == "accuracy":
        return metrics.accuracy_score(y, p)
    return metrics.f1_score(y, p, average="binary" if len(np.unique(y)) == 2 else "macro")


def sample(space, rng, center=None, width=1.0):
    """Random point; with `center`, a perturbation of it (width shrinks the neighbourhood)."""
    out = {}
    for name, spec in space.items():
        kind = spec[0]
        if kind == "choice":
            opts = spec[1]
            out[name] = center[name] if center and rng.random() > 0.3 * width else rng.choice(opts)
            continue
        lo, hi = spec[1], spec[2]
        if kind == "log":
            a, b = math.log(lo), math.log(hi)
            v = math.log(center[name]) + rng.gauss(0, 0.35 * width * (b - a)) if center else rng.uniform(a, b)
            out[name] = float(math.exp(min(max(v, a), b)))
        else:
            v = center[name] + rng.gauss(0, 0.25 * width * (hi - lo)) if center else rng.uniform(lo, hi)
            v = min(max(v, lo), hi)
            out[name] = int(round(v)) if kind == "int" else float(v)
    return out


def evaluate(X, y, args, params, classification):
    scores = []
    split = (StratifiedKFold if classification else KFold)(n_splits=args.folds, shuffle=True, random_state=args.seed)
    for tr, va in split.split(X, y):
        model = make_model(args.model, params, classification, args.seed)
        model.fit(X.iloc[tr], y.iloc[tr])
        scores.append(score(args.metric, y.iloc[va], model, X.iloc[va]))
    return float(np.mean(scores)), float(np.std(scores))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default="data/train.csv")
    ap.add_argument("--target", required=True)
    ap.add_argument("--metric", required=True, choices=["rmse", "mae", "r2", "accuracy", "f1", "roc_auc", "logloss"])
    ap.add_argument("--model", default="hgb", choices=sorted(SPACES))
    ap.add_argument("--budget", type=float, default=240, help="seconds for the whole search")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--coarse-frac", type=float, default=0.6, help="share of the budget for wide sampling")
    ap.add_argument("--log", default="search_log.jsonl")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def load_trials(args):
    """Earlier trials of the same model and metric from the log (a resumed search)."""
    trials = []
    if os.path.exists(args.log):
        with open(args.log) as f:
            for line in f:
                r = json.loads(line)
                if r.get("model") == args.model and r.get("metric") == args.metric:
                    trials.append(r)
        print(f"resuming: {len(trials)} earlier trials in {args.log}")
    return trials


def next_params(n, elapsed, trials, best, args, rng):
    """(params, stage) of the next trial: the defaults first, then coarse, then fine around the best."""
    space = SPACES[args.model]
    if n == 0 and not any(r["params"] == {} for r in trials):
        return {}, "default"
    if elapsed < args.coarse_frac * args.budget or best is None or not best["params"]:
        return sample(space, rng), "coarse"
    progress = (elapsed - args.coarse_frac * args.budget) / ((1 - args.coarse_frac) * args.budget)
    return sample(space, rng, center=best["params"], width=max(0.15, 1 - progress)), "fine"


def search(X, y, args, classification, sign, trials, t_start):
    """Run trials until the next one would overrun the budget; each is logged as it ends."""
    rng = random.Random(args.seed * 100003 + len(trials))   # reproducible, new points on resume

    def best():
        return max(trials, key=lambda r: sign * r["mean"]) if trials else None

    durations = []
    n = 0
    while True:
        elapsed = time.time() - t_start
        est = max(durations) if durations else 0.0
        if elapsed + est > args.budget:
            break
        params, stage = next_params(n, elapsed, trials, best(), args, rng)
        t0 = time.time()
        try:
            mean, std = evaluate(X, y, args, params, classification)
        except Exception as e:  # bad combination: log and continue
            print(f"trial failed: {params}: {e}")
            n += 1
            continue
        durations.append(time.time() - t0)
        rec = {"model": args.model, "metric": args.metric, "stage": stage, "mean": mean, "std": std,
               "seconds": round(durations[-1], 2), "params": params}
        trials.append(rec)
        with open(args.log, "a") as f:
            f.write(json.dumps(rec) + "\n")
        b = best()
        print(f"[{time.time() - t_start:6.1f}s] {stage:7s} {args.metric}={mean:.5f} +-{std:.5f}  "
              f"best={b['mean']:.5f}  {params}", flush=True)
        n += 1


def summarize(trials, sign):
    """The top 5 trials, and whether the best beats the defaults by more than the noise."""
    top = sorted(trials, key=lambda r: -sign * r["mean"])[:5]
    default = next((r for r in trials if r["params"] == {}), None)
    print(f"\n{len(trials)} trials; top 5 ({'higher' if sign > 0 else 'lower'} is better):")
    for r in top:
        print(f"  {r['mean']:.5f} +-{r['std']:.5f}  {r['params']}")
    if default:
        gain = sign * (top[0]["mean"] - default["mean"])
        print(f"defaults: {default['mean']:.5f}; best gain {gain:+.5f} vs fold std {top[0]['std']:.5f}"
              + ("  (within noise: prefer defaults or a simpler setting)" if gain < top[0]["std"] / 2 else ""))


def main():
    args = parse_args()
    t_start = time.time()
    X, y = load_xy(args.train, args.target)
    classification = args.metric in CLASSIFICATION
    sign = 1 if args.metric in HIGHER_IS_BETTER else -1
    trials = load_trials(args)
    search(X, y, args, classification, sign, trials, t_start)
    if not trials:
        print("no trial finished: raise --budget or use fewer --folds")
        return
    summarize(trials, sign)


if __name__ == "__main__":
    main()
