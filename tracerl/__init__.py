"""tracerl: offline RL and off-policy evaluation on logged agent traces."""
