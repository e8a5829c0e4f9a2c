"""Code common to every rlfleet service: wire models, run config, payload codec and store, HTTP client.

Kept free of heavy imports at package level so the coordinator can use it without loading torch or gymnasium.
"""
