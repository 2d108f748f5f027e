"""Build-time only: writes the full labelled table. arex splits it; the agent never sees this file."""
import csv
import os

from sklearn.datasets import load_breast_cancer

data = load_breast_cancer()
os.makedirs("data", exist_ok=True)
names = [n.replace(" ", "_") for n in data.feature_names]
with open("data/full.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["id"] + names + ["malignant"])
    for i, (row, target) in enumerate(zip(data.data, data.target)):
        writer.writerow([i] + [float(v) for v in row] + [int(target == 0)])
