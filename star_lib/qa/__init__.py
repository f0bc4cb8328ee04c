"""Out-of-domain QA: the agent as a search agent on the seven Search-R1 test sets (the paper's Table 2).

Modules (import what you need; nothing heavy loads at package import):

- :mod:`star_lib.qa.retriever` — ``BM25Retriever.open(corpus)`` (bm25s, index saved once and loaded
  memory-mapped), ``DenseRetriever`` (optional sentence-transformers), ``open_retriever``.
- :mod:`star_lib.qa.tools` — ``SearchTools``: the ``Tools`` protocol with one ``Search{query}`` tool.
- :mod:`star_lib.qa.datasets` — ``load_dataset`` / ``load_datasets`` for nq, triviaqa, popqa, hotpotqa,
  2wikimultihopqa, musique, bamboogle (FlashRAG and single-answer JSONL; seeded ``limit``).
- :mod:`star_lib.qa.metrics` — ``normalize_answer``, ``exact_match``, ``f1_score``, ``cover_exact_match``.
- :mod:`star_lib.qa.prompt` — the QA system/user prompts for the travel agent's ReAct protocol.
- :mod:`star_lib.qa.baseline` — ``BaselineAgent``: search the question, answer with the best span.
- :mod:`star_lib.qa.evaluate` — ``run_qa_episodes`` (the travel runner with ``SearchTools``),
  ``evaluate_qa``, ``write_results`` (``qa.parquet`` + ``qa_summary.parquet``).
"""
