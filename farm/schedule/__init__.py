"""Nightly sweeps: cron schedules from farm.yaml, a daemon, catch-up after downtime.

- model:   Schedule, CatchUp, Outcome, Trigger (frozen values, enums)
- config:  the `schedules:` section of farm.yaml -> Schedule values (FILE:LINE errors)
- cron:    next slot, missed slots and the catch-up decision (pure; the clock is passed in)
- nightly: each night is a separate experiment `<name>--<YYYYMMDD-HHMMSS>` (why: see there)
- fire:    one night: derived spec, run_experiment, max_runtime_s, regression events
- firings: the schedule_firings table (store migration 2); history: nightly points for regress
- daemon:  sleep until the next slot, fire, repeat; stops between runs when told
"""
