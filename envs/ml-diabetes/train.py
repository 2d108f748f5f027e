"""Baseline: linear regression on body-mass index alone. Writes submission.csv (id, prediction)."""
import pandas as pd
from sklearn.linear_model import LinearRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = ["bmi"]
X_train, y_train = train[features], train["progression"]
X_test = test[features]

model = LinearRegression()
model.fit(X_train, y_train)
pd.DataFrame({"id": test["id"], "prediction": model.predict(X_test)}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
