"""The competition's grader, as MLE-bench competitions ship one: accuracy of `survived` by passenger.
(arex computes `accuracy` itself; this module documents the metric.)"""


def grade(submission, answers) -> float:
    # pandas DataFrames (as MLE-bench passes them) or lists of rows (an image without pandas)
    submission, answers = (t.to_dict("records") if hasattr(t, "to_dict") else t for t in (submission, answers))
    truth = {row["passenger"]: str(row["survived"]) for row in answers}
    predicted = {row["passenger"]: str(row["survived"]) for row in submission}
    return sum(predicted[key] == value for key, value in truth.items()) / len(truth)
