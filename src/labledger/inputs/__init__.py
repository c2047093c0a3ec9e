"""Inputs: what users hand labledger (result rows, microbatch records), read and validated.

The first stage of the flow: files and logged dicts become checked, columnar data here; nothing in
this package writes to the ledger or computes a metric.
"""
