"""Many candidate policies at once through the world's physics: the batched simulators."""
