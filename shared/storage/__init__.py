"""Where payloads, policies and checkpoints are kept: the store protocol, the local and S3 stores, the factory that
opens a run's stores from the settings, and the run directory's layout.
"""
