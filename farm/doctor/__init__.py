"""`farm doctor`: what each phone gives farm (checks: pure decisions; probe: the reads)."""
