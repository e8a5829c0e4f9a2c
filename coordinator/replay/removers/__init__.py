"""The rules that take items and chunks out of the replay buffer (Reverb's removers): the ring overwriting old
rows at capacity, `max_use` and `max_staleness`. Each decides and counts; the buffer carries a removal out on
its storage and sampler."""
