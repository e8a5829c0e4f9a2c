"""What every worker process shares: its settings, the HTTP client, its session with the coordinator and the life
of the process around them.
"""
