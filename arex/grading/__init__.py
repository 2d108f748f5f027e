"""Grading: the online judge and the ML metric grader."""
