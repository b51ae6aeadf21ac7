"""The autoscalers the benchmark compares, looped and batched."""
