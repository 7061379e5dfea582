"""What the tests share: comparison with google-adk's originals
(`compare`), generated sessions (`strategies`, `window_sessions`), scripted
models and the Runner harness (`scripted_llm`, `traffic_llm`, `exact_llm`,
`runner_harness`), the conversations and scenarios several suites run
(`conversation`, `traffic_conversation`, `exact_runs`, `exact_scenarios`,
`truth_scenarios`, `audit_scenarios`, `ground_truth`) and the throwaway
PostgreSQL server (`postgres`, also a command). No test module imports
another; they import from here.
"""
