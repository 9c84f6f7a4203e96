"""`tolk proxy`: a reverse proxy that routes by language pair, load and health."""
