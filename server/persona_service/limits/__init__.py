"""Rate limits, concurrency budgets and monthly quotas (state in Redis)."""
