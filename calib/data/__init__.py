"""Data: from a corpus on disk or on the Hugging Face Hub to the prompts sent to the models.

- :mod:`calib.data.sources` and :mod:`calib.data.hub`: documents from files, tables (JSONL, Parquet,
  CSV; gzip/zstd) and Hub datasets at pinned revisions, streamed in bounded memory;
- :mod:`calib.data.extract`, :mod:`calib.data.candidates`, :mod:`calib.data.treesitter`: functions of Python
  (``ast``), C, C++, Java, Rust and Go (tree-sitter), with filters and drop reasons, into the functions table
  (:mod:`calib.data.schema`);
- :mod:`calib.data.prompts`: prompts cut with the target server's own tokenizer;
- :mod:`calib.data.parseback`: a completion parsed back into exactly one function;
- :mod:`calib.data.controls`: matched controls; :mod:`calib.data.judge`: the optional LLM-judge filter.
"""
