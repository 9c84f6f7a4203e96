"""What test modules share, so that none imports another test module or conftest.py:

- `main_server`: the main server's configuration and keys (conftest.py's fixtures build it)
- `clients`: the HTTP client the tests use on a server
- `errors`: assertions on tolk's error bodies
- `polling`: waiting for a condition, with a timeout and a message
- `documents`: the sample documents and what of their structure a translation keeps
- `gpu`: a stand-in for NVML
- `bench`: a bench run's results, for the report

tests/helpers.py (servers and processes), tests/manifests.py and tests/postgres.py are the
older support modules, outside this package.
"""
