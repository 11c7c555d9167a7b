"""Write paths: bulk insert, upsert and delete through one write transaction, and the base-file writers their tasks run."""
