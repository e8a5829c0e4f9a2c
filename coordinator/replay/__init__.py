"""The coordinator's replay buffer: chunk metadata, sampling units and the sum-tree sampler."""
