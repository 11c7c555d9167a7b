"""Write paths: bulk insert, the seven-step upsert and delete, their transaction, and the base-file writers they run in tasks."""
