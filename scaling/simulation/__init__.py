"""The offline simulated worlds and what runs in them, in layers: ``world`` (the Event Hubs
world: scenario, physics, the loop, traces, judges) < ``peers`` (the autoscalers compared) <
``drivers`` (many candidates at once) | ``queue`` (Service Bus) | ``namespace`` (throughput
units). The front ends that compare and time them are ``scaling.benchmarks``.

Its own stack over the domain: may import ``domain`` and numpy only. ``tuning``,
``benchmarks``, ``local`` and ``commands`` import it; the deployed app never does."""
