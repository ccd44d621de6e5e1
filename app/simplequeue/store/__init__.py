"""The store: one interface (protocol.py), one folder per database dialect with its SQL beside it.

The composition root builds a store through factory.py; everything else sees the protocol only.
"""
