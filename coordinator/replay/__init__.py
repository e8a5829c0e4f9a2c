"""The coordinator's replay buffer over chunk metadata, in parts: storage (the ring), samplers and their registry,
removers, composed by `buffer.ReplayBuffer`; sampling units and the sum-tree beside them."""
