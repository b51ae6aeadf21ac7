"""The benchmark front ends: quality (benchmark, family, gate, optimum, stress) and speed (engine, tuning)."""
