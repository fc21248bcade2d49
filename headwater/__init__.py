"""Headwater: a streaming SQL database that speaks the PostgreSQL wire protocol."""

__version__ = "0.1.0"
