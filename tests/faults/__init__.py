"""Fault injection: real `simplequeue serve` processes, a private PostgreSQL cluster, kill -9 and SIGSTOP."""
