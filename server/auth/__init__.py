"""Who a client is and what it may do.

scram.py and passwords.py: password verifiers and the SCRAM math; hba.py: which
rule a connection gets; exchange.py: the authentication messages at startup;
privilege_checks.py: the privileges a statement needs; roles.py: role DDL and
GRANT/REVOKE. The privilege model itself is catalog/privileges.py.
"""
