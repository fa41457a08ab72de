"""The engine: runs -> phones -> stored results.

- planner (pure; farm/engine/planner.py): experiment x phones -> runs with stable ids;
- runner.run_experiment(RunOptions): what `farm run` does (load, select phones, plan, persist
  PENDING runs, lease phones, run the sweep, summarise); exit codes via RunSummary.exit_code;
- scheduler.Sweep: one worker thread per leased phone, retries from the attempt's outcome
  (farm.engine.attempt_rules decides, pure), events in the store, PhoneStatus per phone for the live view;
  workers: Worker/PhoneStatus and the narrow side of a Sweep its helpers act through;
- coordination.Supervisor: a Sweep's heartbeat (drops phones whose lease was taken over),
  takeover of dead coordinators' runs, phones that join, when the sweep is over;
- ladder: the recovery ladder of a phone that stops answering (reconnect, reboot, power-cycle,
  quarantine); cancel: one phone's stop signal under the sweep's;
- driver.PhoneDriver: what a worker does on its phone (AdbDriver: the lifecycle over adb);
- model: the value types (PreparedPhone, RunJob, RunResult, Gates) every other module shares;
- lifecycle.execute_run: one attempt on one phone (prepare, sampler, load, benchmark with timeout,
  stop, collect, restore); prepare_phone probes and deploys once per phone;
- conditions: the temperature and battery gates, charging off for a measurement and back on;
- onphone: the run folder and the programs of a run on the phone (sampler, load, benchmark);
- baseline: the idle power of each phone, once per sweep;
- watch: the running sampler's newest readings for the live view (its own session, ~1 Hz);
- deploy: programs by (name, ABI), content-addressed on the phone; an external program's binary
  for the phone's ABI and its assets (NoBinaryForAbi: the phone is skipped);
- program: what runs for one job (args/env rendered, argv on the phone) and what an external
  program's output means (its adapter's verdict, metrics without iteration stamps);
- tuning: benchmark.tune, each gpu workload tuned once per phone before the sweep;
- recovery: what a restarted farm repairs (dead executions, RUNNING runs, charging left off,
  stale processes on phones);
- collect / progress: artifacts, environment snapshot, metrics rows; the live-view Snapshot.
"""
