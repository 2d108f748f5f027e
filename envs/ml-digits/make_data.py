"""Build-time only: writes the full labelled table. arex splits it; the agent never sees this file."""
import csv
import os

from sklearn.datasets import load_digits

digits = load_digits()
os.makedirs("data", exist_ok=True)
with open("data/full.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["id"] + [f"px{i}" for i in range(64)] + ["label"])
    for i, (row, label) in enumerate(zip(digits.data, digits.target)):
        writer.writerow([i] + [int(v) for v in row] + [int(label)])
