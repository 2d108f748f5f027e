"""`arex select`: keep or drop whole trajectories. `selector` runs the verdicts (re-grading, the
LLM judge, the verdict cache), `criteria` holds the drop criteria as a table of small functions,
`leaks` the hidden-content net, `config` their settings. See README.md beside this file."""
