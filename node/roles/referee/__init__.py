"""The referee's room: `verispec serve referee`.

node   RefereeNode (replays a disputed position; commit-reveal vote; resolve); judge_position, the referees' rule
"""
