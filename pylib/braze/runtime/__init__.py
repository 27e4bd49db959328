"""The runtime: compiled-code caching and execution, communication."""
