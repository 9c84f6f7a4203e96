"""What tests share, so that no test module imports another test module or conftest.py:

- `paths`: the repository and the tests' data folder
- `servers`: real `tolk serve` processes (ServerProcess), the server in-process over stand-in
  engines (InProcessServer), and their configs and environment
- `standin_server`: `tolk serve` over stand-in engines in a process of its own (a script)
- `processes`: `python -m tolk` commands, and waiting for processes to end
- `main_server`: the main server's configuration and keys (conftest.py's fixtures build it)
- `clients`: the HTTP clients the tests use on a server
- `metrics`: a server's Prometheus metrics
- `errors`: assertions on tolk's error bodies
- `polling`: waiting for a condition, with a timeout and a message
- `texts`: source texts of exact token lengths
- `documents`, `files`, `samples/`, `document_paths`: sample documents and files, and what of
  their structure a translation keeps
- `deepl`, `prompt_examples`, `quotas`, `pair_server`, `prometheus`: what the tiers of one
  feature's tests share
- `manifests`: the Kubernetes manifests, rendered; `postgres`: a real PostgreSQL
- `gpu`: a stand-in for NVML; `bench`: a bench run's results, for the report
"""
