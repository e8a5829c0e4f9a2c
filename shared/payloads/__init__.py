"""What a chunk of experience is: the spaces, the payload's columns and codec, the contracts third parties write to,
and recorded datasets.
"""
