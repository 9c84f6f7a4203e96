"""What tolk keeps between requests, one module each: `database` (the SQLAlchemy engines for
SQLite and PostgreSQL, one code path), `keys` (API keys, usage, API-made glossaries and style
rules: the key store), `memories` (translation memories users bring as TMX) and
`segment_cache` (segments translated once and not sent to the engine again; its settings are
still `memory` in the configuration)."""
