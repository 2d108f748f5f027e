"""The competition's grader, as MLE-bench competitions ship one: RMSE of `fare_amount` by ride key.
(arex computes `root-mean-squared-error` itself; this module documents the metric.)"""


def grade(submission, answers) -> float:
    # pandas DataFrames (as MLE-bench passes them) or lists of rows (an image without pandas)
    submission, answers = (t.to_dict("records") if hasattr(t, "to_dict") else t for t in (submission, answers))
    truth = {row["key"]: float(row["fare_amount"]) for row in answers}
    predicted = {row["key"]: float(row["fare_amount"]) for row in submission}
    return (sum((predicted[key] - value) ** 2 for key, value in truth.items()) / len(truth)) ** 0.5
