"""Write paths: bulk insert (and, next, the seven-step upsert), and the base-file writers they run in tasks."""
