"""Baseline: a nearest-neighbour vote on two unscaled features. Writes submission.csv (id, prediction = P(malignant))."""
import pandas as pd
from sklearn.neighbors import KNeighborsClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = ["mean_texture", "mean_smoothness"]
X_train, y_train = train[features], train["malignant"]
X_test = test[features]

model = KNeighborsClassifier(n_neighbors=5)
model.fit(X_train, y_train)
pd.DataFrame({"id": test["id"], "prediction": model.predict_proba(X_test)[:, 1]}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
