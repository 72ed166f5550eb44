"""The watchdog's room: `verispec serve watchdog` and `verispec audit`.

node   WatchdogNode (audits finished jobs by sampled replay; opens, follows and cashes its disputes)
audit  the audit replays of chain data (audit_job; `verispec audit`: replay_draft, replay_target, rule_faults)
"""
