"""Files: atomic writes, Parquet/JSON reading, and staged publication of stage outputs."""
