"""Baseline: a shallow decision tree on the raw pixels. Writes submission.csv (id, prediction)."""
import pandas as pd
from sklearn.tree import DecisionTreeClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = [c for c in train.columns if c.startswith("px")]
X_train, y_train = train[features], train["label"]
X_test = test[features]

model = DecisionTreeClassifier(max_depth=5, random_state=0)
model.fit(X_train, y_train)
pd.DataFrame({"id": test["id"], "prediction": model.predict(X_test)}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
