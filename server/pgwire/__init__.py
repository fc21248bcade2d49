"""The PostgreSQL wire protocol v3 as bytes: framing, the startup packet, backend messages.

No sessions and no statements here: server/connection.py drives a connection with these.
"""
