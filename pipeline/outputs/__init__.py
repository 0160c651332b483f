"""The output folder every command shares: staged Arrow files (staging.py),
the DuckDB tables and Parquet files made from them (finalize.py), the
analyst views (views.py), the atomic set of files a run publishes
(output_set.py), link-safe file operations (safe_fs.py) and the refusals
of dangerous or foreign folders (out_guard.py). Never write into OUT
outside these modules: the tests plant links and kill runs mid-write.
"""
