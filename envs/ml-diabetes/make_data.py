"""Build-time only: writes the full labelled table. arex splits it; the agent never sees this file."""
import csv
import os

from sklearn.datasets import load_diabetes

data = load_diabetes(scaled=False)
os.makedirs("data", exist_ok=True)
with open("data/full.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["id"] + list(data.feature_names) + ["progression"])
    for i, (row, target) in enumerate(zip(data.data, data.target)):
        writer.writerow([i] + [float(v) for v in row] + [float(target)])
