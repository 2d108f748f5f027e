"""`arex export`, `push` and `train-check`: kept trajectories into parquet shards (`export`,
`rows`), token masks (`masks`), the dataset card (`card`), the Hub upload (`push`) and the
training checks (`train`, `train_check`), configured by `config`. See README.md beside this file."""
